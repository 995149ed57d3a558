"""Helpers for the pytest files that drive real Bazel (aquery, consumer, load errors)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIX_FILE = ROOT / "rules" / "shim_symbol_prefix.bzl"


def run_bazel(
    args: Sequence[str],
    cwd: Path = ROOT,
    startup: Sequence[str] = (),
    check: bool = True,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `bazel <startup> <args>` in `cwd` (with `env` added to the environment); with check,
    fail the test on a non-zero exit."""
    if shutil.which("bazel") is None:
        pytest.fail("bazel is not on PATH: run tools/bootstrap.sh (make setup)")
    argv = ["bazel", *startup, *args]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} (in {cwd}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def normalize_label(label: str) -> str:
    """`//p:t` for main-repository labels, as Bazel 4.x (`//p:t`) and 7.x (`@@//p:t`) print them."""
    for head in ("@@//", "@//"):
        if label.startswith(head):
            return label[len(head) - 2 :]
    return label


def defined_dynamic_symbols(path: Path) -> set[str]:
    """Names of the defined dynamic symbols of an ELF file (`nm -D --defined-only`)."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(path)], check=True, capture_output=True, text=True
    ).stdout
    rows = (line.split() for line in out.splitlines())
    return {row[2].split("@", 1)[0] for row in rows if len(row) >= 3}
