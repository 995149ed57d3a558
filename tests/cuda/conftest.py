"""Builds of the slim CUDA libraries shared by the tests (no GPU needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "gpu"))

import build_cuda_libs  # noqa: E402


@pytest.fixture(scope="session")
def cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-prefixed"))


@pytest.fixture(scope="session")
def unprefixed_cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-unprefixed"), unprefixed=True)


@pytest.fixture(scope="session")
def asan_cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-asan"), sanitize=True)
