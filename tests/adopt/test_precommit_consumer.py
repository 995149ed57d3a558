"""(e) pre-commit runs this repository's hook (.pre-commit-hooks.yaml) in acme's repository:
`pre-commit try-repo` installs shimkit from this checkout into pre-commit's own environment
and lints acme's committed library and blob with acme's prefix file. Negative control: acme
changes its prefix file but not its binaries; the hook fails with exit code 8."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.adopt.conftest import (
    CACHE,
    ROOT,
    CMakeBuild,
    copy_acme,
    exports,
    git_commit_all,
    run,
    timed,
    with_prefix,
)

pytestmark = pytest.mark.slow


def test_precommit_hook_lints_the_consumer(
    acme_cmake: CMakeBuild, acme_blob: Path, tmp_path: Path
) -> None:
    repo = copy_acme(tmp_path / "acme", acme_blob)
    (repo / "lib").mkdir()
    shutil.copyfile(acme_cmake.shims, repo / "lib" / "libacme_shims.so")
    assert "acme_aoti_torch_dtype_float32" in exports(repo / "lib" / "libacme_shims.so")
    git_commit_all(repo, "acme with its shim library and model")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHIMKIT_")}
    env["PRE_COMMIT_HOME"] = str(CACHE / "pre-commit-home")
    pre_commit = Path(sys.executable).parent / "pre-commit"
    try_repo = [pre_commit, "try-repo", ROOT, "shimkit-lint", "--all-files", "--verbose"]
    ok_proc = run([pre_commit, "validate-config", ".pre-commit-config.yaml"], cwd=repo, env=env)
    assert ok_proc.returncode == 0, ok_proc.stdout + ok_proc.stderr
    with timed("pre-commit try-repo (installs shimkit from source)"):
        passed = run(try_repo, cwd=repo, env=env)
    assert passed.returncode == 0, passed.stdout[-4000:] + passed.stderr[-2000:]
    assert "shimkit lint (prefixed shim ABI)" in passed.stdout and "Passed" in passed.stdout
    assert "clean (prefix acme_)" in passed.stdout
    # Negative control: acme's prefix file changes, its library and blob do not.
    with_prefix(repo / "shim_symbol_prefix.bzl", "acme2_")
    git_commit_all(repo, "acme2 prefix, stale binaries")
    with timed("pre-commit try-repo (installs shimkit from source)"):
        failed = run(try_repo, cwd=repo, env=env)
    assert failed.returncode == 1, failed.stdout[-4000:]
    assert "- exit code: 8" in failed.stdout, failed.stdout[-4000:]
    assert "[prefix acme_, configured acme2_]" in failed.stdout
