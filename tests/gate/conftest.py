"""Gate fixtures: the lint tests' gcc-built ELF files, copied per test."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from shimkit.config import ShimConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lint"))
from lint_builders import build_all


@pytest.fixture(scope="session")
def gate_elf_dir(tmp_path_factory: pytest.TempPathFactory, config: ShimConfig) -> Path:
    out = tmp_path_factory.mktemp("gate-elf")
    build_all(config, out)
    return out


@pytest.fixture
def workdir(tmp_path: Path, gate_elf_dir: Path) -> Callable[..., Path]:
    """Copy fixtures into tmp_path/out under the given names: place(src, dst=None)."""
    out = tmp_path / "out"
    out.mkdir()

    def place(source: str, target: str | None = None) -> Path:
        dest = out / (target or source)
        shutil.copyfile(gate_elf_dir / source, dest)
        return dest

    return place
