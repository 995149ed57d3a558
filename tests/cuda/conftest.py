"""Builds shared by the CUDA tests (no GPU needed): the slim CUDA libraries, the fake
CUDA libraries (tests/cuda/fake) and a fake CUDA blob."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shimkit.config import load_config

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake"
FAKE_LIBRARIES = ("fake_cudart", "fake_cublas", "fake_cublaslt", "fake_cudnn")
sys.path.insert(0, str(ROOT / "tools" / "gpu"))

import build_cuda_libs  # noqa: E402


@pytest.fixture(scope="session")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fake CUDA runtime, cuBLAS, cuBLASLt and cuDNN (see tests/cuda/fake)."""
    out = tmp_path_factory.mktemp("fake-cuda")
    built = {}
    for name in FAKE_LIBRARIES:
        built[name] = out / f"{name}.so"
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O1", str(FAKE / f"{name}.c"), "-o", str(built[name])],
            check=True,
        )
    return built


def fake_env(fakes: dict[str, Path]) -> dict[str, str]:
    """The environment that makes the slim CUDA shims open the fakes."""
    return {
        "SHIMKIT_CUDART": str(fakes["fake_cudart"]),
        "SHIMKIT_CUBLAS": str(fakes["fake_cublas"]),
        "SHIMKIT_CUBLASLT": str(fakes["fake_cublaslt"]),
        "SHIMKIT_CUDNN": str(fakes["fake_cudnn"]),
    }


def build_fake_blob(out: Path, *defines: str) -> Path:
    """fake_cuda_blob.c.in for the checkout's prefix, built with `defines` (-DNAME)."""
    config = load_config()
    template = (FAKE / "fake_cuda_blob.c.in").read_text()
    source = out / "blob.c"
    source.write_text(re.sub(r"PREFIX\((\w+)\)", lambda m: config.prefixed(m.group(1)), template))
    blob = out / "blob.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-z,noexecstack", *defines, str(source), "-o", str(blob)],
        check=True,
    )
    return blob


@pytest.fixture(scope="session")
def fake_blob(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in CUDA blob through the prefixed shims: one input x [N, N], out = x @ x."""
    return build_fake_blob(tmp_path_factory.mktemp("fake-blob"))


@pytest.fixture(scope="session")
def fake_old_blob(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The x @ x blob without AOTInductorModelContainerRunSingleThreaded (an older torch's)."""
    return build_fake_blob(tmp_path_factory.mktemp("fake-old-blob"), "-DNO_SINGLE_THREADED")


@pytest.fixture(scope="session")
def fake_host_blob(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in blob whose outputs come from host fallbacks (topk and histc of x)."""
    return build_fake_blob(tmp_path_factory.mktemp("fake-host-blob"), "-DHOST_STEPS")


@pytest.fixture(scope="session")
def cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-prefixed"))


@pytest.fixture(scope="session")
def unprefixed_cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-unprefixed"), unprefixed=True)


@pytest.fixture(scope="session")
def asan_cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_cuda_libs.build(tmp_path_factory.mktemp("cuda-asan"), sanitize=True)
