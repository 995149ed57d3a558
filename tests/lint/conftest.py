"""Fixtures for the lint tests: gcc-built ELF files, an isolated reference cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_builders import build_all
from shimkit.config import ShimConfig


@pytest.fixture(scope="session")
def elf_dir(tmp_path_factory: pytest.TempPathFactory, config: ShimConfig) -> Path:
    out = tmp_path_factory.mktemp("lint-elf")
    build_all(config, out)
    return out


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shimkit-cache")


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    monkeypatch.setenv("SHIMKIT_CACHE_DIR", str(cache_dir))
