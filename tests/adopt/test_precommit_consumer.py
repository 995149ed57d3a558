"""(e) pre-commit runs this repository's hook (.pre-commit-hooks.yaml) in acme's repository,
installing shimkit from this working tree into pre-commit's own environment (a source
build: the wheel's CMake build runs there). Two ways in:
- `pre-commit try-repo`, the way to try a hook repository (a fresh install every run);
- acme's own .pre-commit-config.yaml with `repo:` pointed at this working tree's snapshot,
  the way acme uses it (installed once into $PRE_COMMIT_HOME, kept under build/adopt).
The hook lints acme's committed library and blob one at a time (`--files`): acme's three
toy shims do not provide what its model imports, which linted together is SK004, rightly.
Negative control: acme changes its prefix file but not its binaries; the hook fails with
exit code 8."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.adopt.conftest import (
    CACHE,
    CMakeBuild,
    copy_acme,
    exports,
    git_commit_all,
    run,
    timed,
    with_prefix,
)

pytestmark = pytest.mark.slow

PRE_COMMIT = Path(sys.executable).parent / "pre-commit"
LIBRARY, BLOB = "lib/libacme_shims.so", "models/tiny_mlp.pt2"
HOOK_NAME = "shimkit lint (prefixed shim ABI)"


def pre_commit_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHIMKIT_")}
    env["PRE_COMMIT_HOME"] = str(CACHE / "pre-commit-home")
    return env


@pytest.fixture
def acme_repo(acme_cmake: CMakeBuild, acme_blob: Path, tmp_path: Path) -> Path:
    """acme as a git repository with its built shim library and its model committed."""
    repo = copy_acme(tmp_path / "acme", acme_blob)
    (repo / "lib").mkdir()
    shutil.copyfile(acme_cmake.shims, repo / LIBRARY)
    assert "acme_aoti_torch_dtype_float32" in exports(repo / LIBRARY)
    git_commit_all(repo, "acme with its shim library and model")
    return repo


def assert_passed(proc) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert HOOK_NAME in proc.stdout and "Passed" in proc.stdout
    assert "1 artifact(s), clean (prefix acme_)" in proc.stdout


def assert_failed_with_bit_8(proc) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "- exit code: 8" in proc.stdout, proc.stdout[-4000:]
    assert "[prefix acme_, configured acme2_]" in proc.stdout


def test_try_repo(acme_repo: Path, shimkit_snapshot: tuple[Path, str]) -> None:
    shimkit_repo, rev = shimkit_snapshot
    try_repo = [PRE_COMMIT, "try-repo", shimkit_repo, "shimkit-lint", "--ref", rev, "--verbose"]
    with timed("pre-commit try-repo (install + run)"):
        assert_passed(run([*try_repo, "--files", BLOB], cwd=acme_repo, env=pre_commit_env()))


def test_consumer_config(acme_repo: Path, shimkit_snapshot: tuple[Path, str]) -> None:
    shimkit_repo, rev = shimkit_snapshot
    config = acme_repo / ".pre-commit-config.yaml"
    text = config.read_text()
    assert "- id: shimkit-lint" in text
    lines = [
        f"  - repo: {shimkit_repo}" if line.startswith("  - repo: ") else line
        for line in text.splitlines()
    ]
    lines = [f"    rev: {rev}" if line.startswith("    rev: ") else line for line in lines]
    config.write_text("\n".join(lines) + "\n")
    env = pre_commit_env()
    validated = run([PRE_COMMIT, "validate-config", config], cwd=acme_repo, env=env)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    git_commit_all(acme_repo, "use this shimkit")
    hook = [PRE_COMMIT, "run", "shimkit-lint", "--verbose", "--files"]
    with timed("pre-commit run (acme's config)"):
        for binary in (LIBRARY, BLOB):
            assert_passed(run([*hook, binary], cwd=acme_repo, env=env))
        # Negative control: acme's prefix file changes, its library and blob do not.
        with_prefix(acme_repo / "shim_symbol_prefix.bzl", "acme2_")
        git_commit_all(acme_repo, "acme2 prefix, stale binaries")
        for binary in (LIBRARY, BLOB):
            assert_failed_with_bit_8(run([*hook, binary], cwd=acme_repo, env=env))
