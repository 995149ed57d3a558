"""Fixtures shared by every test folder: repository paths, the config, the CLI.

Keep this small; a folder's own fixtures go in that folder's conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from shimkit.config import ShimConfig, load_config

ROOT = Path(__file__).resolve().parents[1]
PREFIX_FILE = ROOT / "rules" / "shim_symbol_prefix.bzl"


def shimkit_executable() -> Path:
    """The installed `shimkit` console script next to this interpreter."""
    return Path(sys.executable).parent / "shimkit"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def config() -> ShimConfig:
    return load_config(PREFIX_FILE)


RunShimkit = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def run_shimkit() -> RunShimkit:
    """Run the `shimkit` console script; returns the finished process (never raises)."""
    exe = shimkit_executable()
    if not exe.is_file():
        pytest.fail(f"{exe} is missing: run tools/bootstrap.sh (editable install of shimkit)")

    def run(
        args: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if k != "SHIMKIT_CONFIG"}
        full_env.update(env or {})
        return subprocess.run(
            [str(exe), *args],
            cwd=cwd or ROOT,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run
