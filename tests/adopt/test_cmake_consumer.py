"""(c) acme builds its shim library with shimkit's CMake package (from the wheel) and lints
it with ctest, outside this checkout. Negative controls: acme changes its prefix file but
not its blob (the blob's lint test fails with bit 8); a hand-set prefix define that
disagrees with the prefix file fails the configure step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.adopt.conftest import (
    CMakeBuild,
    Venv,
    cmake_configure_build,
    copy_acme,
    exports,
    ok,
    run,
    timed,
    with_prefix,
)

pytestmark = pytest.mark.slow


def ctest(build: Path, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    """ctest's exit code and each test's outcome ("Passed"/"Failed")."""
    proc = run(["ctest", "--test-dir", build, "--output-on-failure"], cwd=build, env=env)
    outcomes = {}
    for line in proc.stdout.splitlines():
        if " Test #" in line and ("Passed" in line or "Failed" in line):
            name = line.split(": ", 1)[1].split(" ", 1)[0]
            outcomes[name] = "Passed" if "Passed" in line else "Failed"
    return proc.returncode, outcomes


def test_cmake_consumer_builds_tests_and_lints(acme_cmake: CMakeBuild, fresh_venv: Venv) -> None:
    with timed("CMake consumer: ctest"):
        rc, outcomes = ctest(acme_cmake.build, fresh_venv.env())
    assert rc == 0, outcomes
    assert outcomes == {
        "acme_shims_test": "Passed",
        "shimkit_lint_acme_shims_shared": "Passed",
        "acme_blob_lint": "Passed",
        "acme_two_owners_must_fail_lint": "Passed",  # passes only when lint exits 16
    }
    # acme's prefix is in the built library's exports, and only acme's prefix.
    shims = {n for n in exports(acme_cmake.shims) if "aoti_torch_" in n}
    assert shims == {
        "acme_aoti_torch_device_type_cpu",
        "acme_aoti_torch_dtype_float32",
        "acme_aoti_torch_layout_strided",
    }
    commands = ok(run(["ninja", "-t", "commands"], cwd=acme_cmake.build)).stdout
    assert "-DAOTI_SHIM_SYMBOL_PREFIX=acme_ " in commands  # from acme's .bzl
    assert "--whole-archive" in commands and "libacme_shims_archive.a" in commands


def test_cmake_consumer_prefix_change_fails_the_blob_lint(
    fresh_venv: Venv, acme_blob: Path, tmp_path: Path
) -> None:
    """Negative control: acme's prefix file says acme2_, its blob still imports acme_."""
    source = copy_acme(tmp_path / "acme", acme_blob)
    built = cmake_configure_build(source, source / "build", fresh_venv)
    with_prefix(source / "shim_symbol_prefix.bzl", "acme2_")
    env = fresh_venv.env()
    ok(run(["cmake", "--build", built.build], cwd=source, env=env))  # re-configures
    assert "acme2_aoti_torch_dtype_float32" in exports(built.shims)  # the build followed
    rc, outcomes = ctest(built.build, env)
    assert rc != 0
    assert outcomes["acme_blob_lint"] == "Failed"
    assert outcomes["shimkit_lint_acme_shims_shared"] == "Passed"
    # The blob test's own command: lint exits with bit 8 (SK001, a shim under acme_).
    listing = json.loads(
        ok(
            run(["ctest", "--test-dir", built.build, "--show-only=json-v1"], cwd=source, env=env)
        ).stdout
    )
    (test,) = [t for t in listing["tests"] if t["name"] == "acme_blob_lint"]
    lint = run(test["command"], cwd=source, env=env)
    assert lint.returncode & 8, lint.stdout
    assert "prefix acme_, configured acme2_" in lint.stdout


@pytest.mark.parametrize("how", ["cache variable", "target definition", "compile option"])
def test_hand_set_prefix_fails_configure(
    fresh_venv: Venv, acme_blob: Path, tmp_path: Path, how: str
) -> None:
    source = copy_acme(tmp_path / "acme", acme_blob)
    env = fresh_venv.env()
    cmake_dir = ok(run(["shimkit", "config", "--cmake-dir"], cwd=source, env=env)).stdout.strip()
    args = ["cmake", "-S", source, "-B", source / "build", f"-Dshimkit_DIR={cmake_dir}"]
    lines = {
        "target definition": "target_compile_definitions(acme_shims_test PRIVATE "
        "AOTI_SHIM_SYMBOL_PREFIX={value})\n",
        "compile option": "add_compile_options(-DAOTI_SHIM_SYMBOL_PREFIX={value})\n",
    }
    cmakelists = source / "CMakeLists.txt"
    original = cmakelists.read_text()

    def configure(value: str) -> str:
        shutil.rmtree(source / "build", ignore_errors=True)
        extra = [f"-DAOTI_SHIM_SYMBOL_PREFIX={value}"] if how == "cache variable" else []
        if how in lines:
            cmakelists.write_text(original + lines[how].format(value=value))
        proc = run([*args, *extra], cwd=source, env=env)
        return "" if proc.returncode == 0 else " ".join(proc.stderr.split())

    error = configure("acme_handset_")
    assert "AOTI_SHIM_SYMBOL_PREFIX is set by hand to 'acme_handset_'" in error, error
    assert f"{source / 'shim_symbol_prefix.bzl'} says 'acme_'" in error, error
    # control: a hand-set value that agrees with the prefix file is accepted
    assert configure("acme_") == ""
