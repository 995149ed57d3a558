"""The CUDA shim library builds here (no GPU), lints clean, and its hand-written
CUDA declarations match the CUDA toolkit's headers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shimkit.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CUDA_INCLUDE = Path("/usr/local/cuda/include")

SIGNATURE_CHECK = """
#include <cuda_runtime_api.h>
#include <type_traits>
#include "shims/cuda/cuda_api.h"
using Official = shimkit::cuda::CudartSignatures<cudaError_t, cudaStream_t, cudaMemcpyKind,
                                                 cudaGraph_t, cudaGraphExec_t,
                                                 cudaStreamCaptureMode, cudaEvent_t,
                                                 cudaHostFn_t>;
// Initialising a pointer of the declared type picks the one overload with
// exactly that type (nvcc adds template overloads) or fails to compile.
#define SAME(fn, sig) [[maybe_unused]] static const Official::sig check_##sig##_##fn = &::fn;
SAME(cudaGetDeviceCount, GetDeviceCount)
SAME(cudaGetDevice, GetDevice)
SAME(cudaSetDevice, SetDevice)
SAME(cudaMalloc, Malloc)
SAME(cudaFree, Free)
SAME(cudaHostAlloc, HostAlloc)
SAME(cudaFreeHost, FreeHost)
SAME(cudaMemcpyAsync, MemcpyAsync)
SAME(cudaMemsetAsync, MemsetAsync)
SAME(cudaStreamSynchronize, StreamSynchronize)
SAME(cudaDeviceSynchronize, DeviceSynchronize)
SAME(cudaGetErrorString, GetErrorString)
SAME(cudaDriverGetVersion, DriverGetVersion)
SAME(cudaStreamCreateWithFlags, StreamCreateWithFlags)
SAME(cudaStreamDestroy, StreamDestroy)
SAME(cudaStreamBeginCapture, StreamBeginCapture)
SAME(cudaStreamEndCapture, StreamEndCapture)
SAME(cudaGraphInstantiate, GraphInstantiate)
SAME(cudaGraphLaunch, GraphLaunch)
SAME(cudaGraphExecDestroy, GraphExecDestroy)
SAME(cudaGraphDestroy, GraphDestroy)
SAME(cudaEventCreate, EventCreate)
SAME(cudaEventRecord, EventRecord)
SAME(cudaEventElapsedTime, EventElapsedTime)
SAME(cudaEventDestroy, EventDestroy)
SAME(cudaLaunchHostFunc, LaunchHostFunc)
static_assert(cudaStreamNonBlocking == shimkit::cuda::kStreamNonBlocking, "non-blocking");
static_assert(cudaStreamCaptureModeRelaxed == shimkit::cuda::kCaptureModeRelaxed, "relaxed");
static_assert(sizeof(cudaStreamCaptureMode) == sizeof(int), "capture mode size");
static_assert(sizeof(cudaError_t) == sizeof(shimkit::cuda::Error), "cudaError_t size");
static_assert(sizeof(cudaMemcpyKind) == sizeof(int), "cudaMemcpyKind size");
static_assert(cudaSuccess == shimkit::cuda::kSuccess, "cudaSuccess");
static_assert(cudaMemcpyDefault == shimkit::cuda::kMemcpyDefault, "cudaMemcpyDefault");
static_assert(cudaMemcpyHostToDevice == shimkit::cuda::kMemcpyHostToDevice, "H2D");
static_assert(cudaMemcpyDeviceToHost == shimkit::cuda::kMemcpyDeviceToHost, "D2H");
static_assert(cudaHostAllocDefault == shimkit::cuda::kHostAllocDefault, "cudaHostAllocDefault");
"""


def compile_check(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "check.cu"
    path.write_text(source)
    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    if Path(nvcc).exists():
        argv = [nvcc, "-std=c++17", "-I", str(ROOT), "-c", str(path), "-o", str(tmp_path / "c.o")]
    else:
        argv = ["g++", "-std=c++17", "-x", "c++", "-I", str(ROOT), "-I", str(CUDA_INCLUDE)]
        argv += ["-fsyntax-only", str(path)]
    return subprocess.run(argv, capture_output=True, text=True)


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_cudart_declarations_match_the_toolkit(tmp_path: Path) -> None:
    done = compile_check(SIGNATURE_CHECK, tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_signature_check_catches_a_mismatch(tmp_path: Path) -> None:
    # Negative control: cudaMalloc checked against cudaFree's signature must not compile.
    wrong = SIGNATURE_CHECK + "SAME(cudaMalloc, Free)\n"
    done = compile_check(wrong, tmp_path)
    assert done.returncode != 0
    assert "cudaMalloc" in done.stderr


@pytest.fixture(scope="module")
def nvidia_include() -> Path:
    """cuDNN's and cuBLAS's headers, read out of the pinned wheels (tools/nvidia_headers.lock)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import fetch_nvidia_headers

    try:
        return fetch_nvidia_headers.fetch()
    except fetch_nvidia_headers.FetchError as exc:
        pytest.fail(f"NVIDIA headers unavailable (network?): {exc}")


def header_check(check: str, include: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    """g++ -fsyntax-only on tests/cuda/`check` with the fetched and the toolkit's headers."""
    argv = ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-I", str(ROOT)]
    argv += ["-I", str(include), "-I", str(CUDA_INCLUDE), *defines]
    argv.append(str(ROOT / "tests" / "cuda" / check))
    return subprocess.run(argv, capture_output=True, text=True)


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_cudnn_declarations_match_cudnn_h(nvidia_include: Path) -> None:
    done = header_check("cudnn_signature_check.cpp", nvidia_include)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_cudnn_check_catches_a_mismatch(nvidia_include: Path) -> None:
    # Negative control: a tensor-descriptor function where a filter one is declared.
    done = header_check("cudnn_signature_check.cpp", nvidia_include, "-DSHIMKIT_BREAK_ONE")
    assert done.returncode != 0
    assert "cudnnSetTensorNdDescriptor" in done.stderr


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_cublas_declarations_match_cublas_headers(nvidia_include: Path) -> None:
    # cuBLAS (cuda_api.h) and cuBLASLt (cublaslt_api.h) against cublas_api.h / cublasLt.h.
    done = header_check("cublas_signature_check.cpp", nvidia_include)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="no CUDA toolkit headers")
def test_cublas_check_catches_a_mismatch(nvidia_include: Path) -> None:
    # Negative control: a matmul-descriptor function where a matrix-layout one is declared.
    done = header_check("cublas_signature_check.cpp", nvidia_include, "-DSHIMKIT_BREAK_ONE")
    assert done.returncode != 0
    assert "cublasLtMatmulDescDestroy" in done.stderr
    assert done.stderr.count("error:") == 1, done.stderr  # that line and nothing else


def lint(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "shimkit", "lint", *map(str, paths)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)


def exported(path: Path) -> list[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


def test_prefixed_cuda_libraries_lint_clean(cuda_libs: dict[str, Path]) -> None:
    done = lint([cuda_libs["shims"], cuda_libs["runner"]])
    assert done.returncode == 0, done.stdout + done.stderr


def test_cuda_shims_export_only_prefixed_names(cuda_libs: dict[str, Path]) -> None:
    config = load_config()
    names = exported(cuda_libs["shims"])
    assert config.prefixed("aoti_torch_create_cuda_stream_guard") in names
    assert config.prefixed("aoti_torch_cuda_addmm_out") in names
    assert config.prefixed("aoti_torch_empty_strided_pinned") in names
    others = [n for n in names if not n.startswith((config.prefix, "shimkit_"))]
    assert others == []


def test_cuda_shims_have_no_link_time_cuda_dependency(cuda_libs: dict[str, Path]) -> None:
    needed = subprocess.run(
        ["readelf", "-d", str(cuda_libs["shims"])], capture_output=True, text=True
    ).stdout
    assert "libcudart" not in needed and "libcublas" not in needed and "libcuda." not in needed


def test_unprefixed_build_fails_lint(unprefixed_cuda_libs: dict[str, Path]) -> None:
    # Negative control: the same sources without the prefix export torch's own names.
    done = lint([unprefixed_cuda_libs["shims"]])
    assert done.returncode != 0
    assert done.returncode & 8, done.stdout
