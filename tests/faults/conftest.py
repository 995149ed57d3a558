"""Fault-injection fixtures: compiled blobs, gcc-built ELF fixtures, a CLI runner that
never raises, and a way to run the CLI as an unprivileged user.

Tests may run as root, where permission bits do not stop a write; the read-only cases
run the CLI as `nobody` through setpriv (util-linux) in world-readable directories.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.fixtures.build import build_all
from tests.runtime.conftest import cases, libs, libtorch_global  # noqa: F401 (fixtures)

SHIMKIT = Path(sys.executable).parent / "shimkit"
NOBODY = 65534


@pytest.fixture(scope="session")
def elf_fixtures() -> dict[str, Path]:
    return build_all()


Cli = Callable[..., subprocess.CompletedProcess[str]]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SHIMKIT_CONFIG"}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def cli() -> Cli:
    """Run `shimkit ARGS`; the finished process (bytes decoded with surrogateescape)."""

    def run(
        args: Sequence[str],
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        user: int | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(SHIMKIT), *args]
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
        return subprocess.run(
            argv,
            cwd=cwd,
            env=env or clean_env(),
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )

    return run


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The process failed with exactly one `shimkit: error:` line and no traceback."""
    assert proc.returncode not in (0, None), proc.stdout + proc.stderr
    assert proc.returncode > 0, f"killed by signal {-proc.returncode}"
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("shimkit: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory `nobody` can reach (pytest's own tmp_path is private to root)."""
    directory = Path(tempfile.mkdtemp(prefix="shimkit-faults-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def can_drop_privileges() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "true"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0
