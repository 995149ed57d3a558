"""Misusing the macros fails at load time on real Bazel, with a message naming the
target and the fix.

A throwaway workspace (fixed path under the temp dir, so its output base is
reused between runs) loads shimkit's rules through `local_repository`; each
package holds one misuse. One `bazel query --keep_going` loads them all. The
positive control is a package of correct uses, whose targets must load. A bad
prefix is the consumer's own prefix file (`shimkit_config(prefix_file = ...)`),
so that case has a second workspace of its own.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from bazel_testlib import ROOT, run_bazel

LOAD = 'load("@shimkit//rules:defs.bzl", "shimkit_cxx_library", "shimkit_shim_library")\n'
# The package of the workspace whose prefix file (its own, at its root) is invalid.
BAD_PREFIX = "bad_prefix"

# package -> (BUILD body, substrings its error must contain)
CASES: dict[str, tuple[str, list[str]]] = {
    "unknown_attr": (
        LOAD + 'shimkit_cxx_library(name = "x", foo = 1)\n',
        ['shimkit_cxx_library(name = "x"): unknown attribute "foo"; allowed: srcs, '],
    ),
    "copts": (
        LOAD + 'shimkit_cxx_library(name = "x", copts = ["-O2"])\n',
        [
            'shimkit_cxx_library(name = "x"): unknown attribute "copts"',
            "use compiler_flags instead of copts",
        ],
    ),
    "missing_twin": (
        LOAD
        + 'shimkit_cxx_library(name = "a")\n'
        + 'shimkit_cxx_library(name = "b", deps = [":a"], aten_mode = "both")\n',
        [
            'shimkit_cxx_library(name = "b"): deps entry ":a" has no ATen twin ":a_aten"',
            'aten_mode = "both"',
            "aten_neutral_deps",
        ],
    ),
    "bad_aten_mode": (
        LOAD + 'shimkit_cxx_library(name = "x", aten_mode = "cuda")\n',
        ['shimkit_cxx_library(name = "x"): aten_mode = "cuda" is not one of'],
    ),
    "shim_not_whole": (
        LOAD + 'shimkit_shim_library(name = "s", link_whole = False)\n',
        ['shimkit_shim_library(name = "s"): link_whole = False', "shimkit_cxx_library"],
    ),
    "neutral_not_a_dep": (
        LOAD + 'shimkit_cxx_library(name = "x", aten_mode = "both", aten_neutral_deps = [":y"])\n',
        [
            'shimkit_cxx_library(name = "x"): aten_neutral_deps entry ":y" is not in deps or '
            "exported_deps"
        ],
    ),
    "select_preprocessor_flags": (
        LOAD
        + 'shimkit_cxx_library(name = "x", '
        + 'preprocessor_flags = select({"//conditions:default": ["-DA"]}))\n',
        ['shimkit_cxx_library(name = "x"): preprocessor_flags must be a plain list under Bazel'],
    ),
    BAD_PREFIX: (
        LOAD + 'shimkit_shim_library(name = "s")\n',
        [
            'shimkit_shim_library(name = "s"): SHIM_SYMBOL_PREFIX "9bad-" is not a valid C '
            "identifier prefix",
            "fix it in the prefix file (shimkit.config / shimkit_config(prefix_file = ...)",
        ],
    ),
}

GOOD = (
    LOAD
    + 'shimkit_cxx_library(name = "a", aten_mode = "both")\n'
    + 'shimkit_cxx_library(name = "n")\n'
    + 'shimkit_cxx_library(name = "b", deps = [":a", ":n"], aten_mode = "both",'
    + ' aten_neutral_deps = [":n"])\n'
    + 'shimkit_shim_library(name = "s", deps = [":b"], aten_mode = "aten")\n'
)
GOOD_TARGETS = {f"//good:{n}" for n in ("a", "a_aten", "n", "b", "b_aten", "s_aten")}

WORKSPACE = """workspace(name = "shimkit_load_errors")
local_repository(name = "shimkit", path = "{root}")
local_repository(name = "bazel_skylib", path = "/usr/share/bazel/tools/skylib")
local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")
local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
local_repository(name = "rules_cc", path = "{root}/third_party/rules_cc_stub")
load("@shimkit//rules:repositories.bzl", "shimkit_config")
shimkit_config({config_args})
"""


def write_workspace(name: str, packages: dict[str, str], config_args: str = "") -> Path:
    """A workspace under the temp dir (fixed path per checkout) holding `packages`' BUILD files."""
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    ws = Path(tempfile.gettempdir()) / f"shimkit-{name}-{os.getuid()}-{key}"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    (ws / "WORKSPACE").write_text(WORKSPACE.format(root=ROOT, config_args=config_args))
    (ws / "BUILD.bazel").write_text("")
    for package, body in packages.items():
        (ws / package).mkdir()
        (ws / package / "BUILD.bazel").write_text(body)
    return ws


def write_bad_prefix_workspace() -> Path:
    """The consumer's own prefix file (a patched copy of shimkit's) cannot start a C identifier."""
    ws = write_workspace(
        "load-errors-prefix",
        {BAD_PREFIX: CASES[BAD_PREFIX][0]},
        config_args='prefix_file = "//:shim_symbol_prefix.bzl"',
    )
    source = (ROOT / "rules" / "shim_symbol_prefix.bzl").read_text()
    pattern = r'(?m)^SHIM_SYMBOL_PREFIX = "[^"]*"'
    patched, count = re.subn(pattern, 'SHIM_SYMBOL_PREFIX = "9bad-"', source)
    assert count == 1, "could not find SHIM_SYMBOL_PREFIX in the copy"
    (ws / "shim_symbol_prefix.bzl").write_text(patched)
    return ws


def query_all(ws: Path) -> tuple[set[str], str]:
    proc = run_bazel(
        ["query", "--keep_going", "//..."], cwd=ws, startup=["--max_idle_secs=60"], check=False
    )
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    return set(proc.stdout.split()), proc.stderr


@pytest.fixture(scope="module")
def query() -> tuple[set[str], str]:
    """Targets and stderr of `bazel query //...` over both workspaces."""
    misuses = {p: body for p, (body, _) in CASES.items() if p != BAD_PREFIX}
    targets, stderr = query_all(write_workspace("load-errors", {**misuses, "good": GOOD}))
    bad_targets, bad_stderr = query_all(write_bad_prefix_workspace())
    return targets | bad_targets, stderr + bad_stderr


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(CASES))
def test_misuse_fails_at_load_time(package: str, query: tuple[set[str], str]) -> None:
    targets, stderr = query
    # The failing target (named in the first expected fragment) and its twin
    # must not be declared, not even partly.
    failing = re.search(r'name = "(\w+)"', CASES[package][1][0])
    assert failing, CASES[package][1][0]
    name = failing.group(1)
    assert not {f"//{package}:{name}", f"//{package}:{name}_aten"} & targets
    errors = [line for line in stderr.splitlines() if f"/{package}/BUILD.bazel" in line]
    assert errors, f"no load error reported for //{package}"
    block = stderr[stderr.index(errors[0]) :]
    for fragment in CASES[package][1]:
        assert fragment in block, f"//{package}: {fragment!r} not in:\n{block[:2000]}"


@pytest.mark.slow
def test_positive_control_correct_uses_load(query: tuple[set[str], str]) -> None:
    targets, stderr = query
    assert {t for t in targets if t.startswith("//good:")} == GOOD_TARGETS, stderr[-3000:]


@pytest.mark.slow
def test_interpreter_without_the_linters_packages_fails_naming_them(tmp_path: Path) -> None:
    """@shimkit_python checks its interpreter when it is made: one line, the fix named."""
    bare = tmp_path / "python-without-site-packages"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    ws = write_workspace("load-errors-python", {})
    args = ["build", "@shimkit_python//:python.sh"]
    proc = run_bazel(args, cwd=ws, check=False, env={"SHIMKIT_PYTHON": str(bare)})
    assert proc.returncode != 0
    assert f"shimkit_python: {bare} lacks pyelftools, numpy, starlark-pyo3, jinja2" in proc.stderr
    assert "or set SHIMKIT_PYTHON to a Python that has them" in proc.stderr
    good = run_bazel(args, cwd=ws, check=False, env={"SHIMKIT_PYTHON": sys.executable})
    assert good.returncode == 0, good.stderr[-2000:]  # control: this venv has them
    run_bazel(["shutdown"], cwd=ws, check=False)
