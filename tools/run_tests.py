#!/usr/bin/env python3
"""Run every test phase of `make test` and print one closing summary line.

Phases: ruff, pytest, `bazel test //...`, buildifier, clang-format. Every phase runs even if
an earlier one fails, so one run shows everything that is broken. The last
line is `N passed, N failed` summed over pytest cases, Bazel test targets and
the lint phases (one check each).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"
BUILDIFIER = ROOT / "node_modules" / ".bin" / "buildifier"
# Inductor's cache for the suite's compiles, in the checkout (build/ is git-ignored and
# `make clean` removes it), not /tmp: the generated code holds the checkout's paths, so a
# checkout's entries serve no other and would outlive it. (~170 MB a run. torch's
# precompiled headers, ~150 MB each and ~1.7 GB a run, still go to /tmp: it puts them in
# its default cache directory, which TORCHINDUCTOR_CACHE_DIR does not move.)
INDUCTOR_CACHE = ROOT / "build" / "inductor-cache"


def test_environment() -> dict[str, str]:
    """This process's environment, with the checkout's Inductor cache unless one is set."""
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(INDUCTOR_CACHE))
    return env


def run(title: str, argv: list[str]) -> tuple[int, str]:
    print(f"\n=== {title}: {' '.join(argv)}", flush=True)
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=test_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    return proc.wait(), "".join(lines)


def pytest_phase() -> tuple[int, int]:
    report = ROOT / ".pytest-report.xml"
    report.unlink(missing_ok=True)
    # The slowest tests are listed at the end: `make test` must stay well inside CI's limit.
    argv = [str(VENV_BIN / "pytest"), "-q", "--durations=30", f"--junitxml={report}", "tests"]
    code, _ = run("pytest", argv)
    if not report.exists():
        return 0, 1
    suite = ET.parse(report).getroot()
    suites = [suite] if suite.tag == "testsuite" else list(suite)
    total = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    passed = total - failed - skipped
    if code not in (0, 1) and failed == 0:  # collection/usage error: count it
        failed = 1
    return passed, failed


_BAZEL_RESULT = re.compile(r"^(//\S+)\s+.*\b(PASSED|FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)\b")


def bazel_phase() -> tuple[int, int]:
    code, out = run("bazel", ["bazel", "test", "//...", "--test_output=errors"])
    passed = failed = 0
    for line in out.splitlines():
        match = _BAZEL_RESULT.match(line.strip())
        if match:
            if match.group(2) == "PASSED":
                passed += 1
            else:
                failed += 1
    if code != 0 and failed == 0:  # build failure before any test ran
        failed = 1
    return passed, failed


def check_phase(title: str, argv: list[str]) -> tuple[int, int]:
    code, _ = run(title, argv)
    return (1, 0) if code == 0 else (0, 1)


# Generated (`shimkit header`, checked by its own --check test), not hand-formatted.
GENERATED_SOURCES = {"shims/aoti_shim_rename.h"}


def tracked(patterns: list[str]) -> list[str]:
    """Tracked files matching git pathspecs."""
    return subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def c_sources() -> list[str]:
    """The tracked C and C++ sources clang-format checks (.clang-format at the root)."""
    listed = tracked(["*.c", "*.cc", "*.cpp", "*.h"])
    return [path for path in listed if path not in GENERATED_SOURCES]


def starlark_sources() -> list[str]:
    """The tracked Starlark files buildifier checks (never build/, e.g. the Bazel 7 chroot)."""
    return tracked(["*.bzl", "*.bazel", "*/WORKSPACE", "WORKSPACE", "*.bzlmod"])


def main() -> int:
    results = {
        "ruff": check_phase(
            "ruff", [str(VENV_BIN / "ruff"), "check", "lint", "tests", "bench", "tools"]
        ),
        "pytest": pytest_phase(),
        "bazel": bazel_phase(),
        "buildifier": check_phase(
            "buildifier",
            [str(BUILDIFIER), "-mode=check", "-lint=warn", *starlark_sources()],
        ),
        "clang-format": check_phase(
            "clang-format",
            [str(VENV_BIN / "clang-format"), "--dry-run", "-Werror", *c_sources()],
        ),
    }
    print("\n=== summary")
    for name, (p, f) in results.items():
        print(f"{name:12s} {p} passed, {f} failed")
    passed = sum(p for p, _ in results.values())
    failed = sum(f for _, f in results.values())
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
