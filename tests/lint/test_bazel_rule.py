"""shimkit_lint_test (rules/lint_test.bzl): hermetic command line, runfiles, runner verdicts."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "rules" / "private" / "lint_runner.py"
TARGETS = ["//tests/lint:example_shims_lint", "//tests/lint:unprefixed_fixture_must_fail_lint"]


def _runner(elf: Path, expect: int) -> subprocess.CompletedProcess[str]:
    args = ["--config", "rules/shim_symbol_prefix.bzl", "lint", "--no-reference", str(elf)]
    return subprocess.run(
        [sys.executable, str(RUNNER), "--expect-exit", str(expect), "--", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_runner_passes_only_on_the_expected_exit(elf_dir: Path) -> None:
    bad = elf_dir / "libimports_unprefixed.so"
    assert _runner(bad, 8).returncode == 0
    wrong = _runner(bad, 0)
    assert wrong.returncode == 1 and "expected 0" in wrong.stderr
    good = elf_dir / "libshim_prefixed.so"
    assert _runner(good, 0).returncode == 0
    assert _runner(good, 8).returncode == 1  # a negative control that stops failing fails


def test_runner_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "lint"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.slow
def test_generated_test_is_hermetic() -> None:
    if shutil.which("bazel") is None:
        pytest.fail("bazel is not on PATH: run tools/bootstrap.sh")
    proc = subprocess.run(
        ["bazel", "build", *TARGETS], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    scripts = [
        ROOT / "bazel-bin" / "tests" / "lint" / f"{t.split(':')[1]}.shimkit_test.sh"
        for t in TARGETS
    ]
    good, bad = (shlex.split(s.read_text().splitlines()[-1]) for s in scripts)
    for argv in (good, bad):
        assert argv[0] == "exec"
        assert not [a for a in argv if a.startswith("/")], argv  # no absolute paths
        config = argv.index("--config")
        assert argv[config + 1] == "rules/shim_symbol_prefix.bzl"
        assert "--no-reference" in argv
    assert good[good.index("--expect-exit") + 1] == "0"
    assert bad[bad.index("--expect-exit") + 1] == "8"
    assert good[-1] == "examples/basic/libexample_shims.so"
    runfiles = scripts[0].with_name(scripts[0].name + ".runfiles") / "shimkit"
    for needed in (
        "lint/shimkit/checks/rules.py",
        "rules/shim_symbol_prefix.bzl",
        "rules/private/lint_runner.py",
        "examples/basic/libexample_shims.so",
    ):
        assert (runfiles / needed).exists(), needed
