"""Shared fixtures for the AOT tests: repo paths and the project config."""

from __future__ import annotations

from pathlib import Path

import pytest
from shimkit.config import ShimConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
RENAME_HEADER = ROOT / "shims" / "aoti_shim_rename.h"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def config() -> ShimConfig:
    return load_config(ROOT / "rules" / "shim_symbol_prefix.bzl")


@pytest.fixture(scope="session")
def rename_header() -> Path:
    return RENAME_HEADER
