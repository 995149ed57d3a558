"""The CUDA runner's bad-input paths, on this machine (CI has no GPU).

Blobs are vetted before anything is loaded: a CPU blob is refused as built
for another device, an unprefixed one as binding to libtorch, garbage as not
ELF; with no GPU or driver every CUDA request fails with the reason, and the
CPU path of the same shim library keeps working.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest
import slim_cuda
from shimkit.config import load_config

ENTRY_POINTS = """
int AOTInductorModelContainerCreateWithDevice(void) { return 1; }
int AOTInductorModelContainerDelete(void) { return 0; }
int AOTInductorModelContainerRun(void) { return 1; }
int AOTInductorModelContainerGetNumInputs(void) { return 0; }
int AOTInductorModelContainerGetNumOutputs(void) { return 0; }
"""


def fake_blob(tmp_path: Path, name: str, imports: list[str]) -> bytes:
    """A shared object with the AOTInductor entry points that calls `imports`."""
    decls = "".join(f"extern int {n}();\n" for n in imports)
    calls = "".join(f"  {n}();\n" for n in imports)
    source = tmp_path / f"{name}.c"
    source.write_text(f"{decls}{ENTRY_POINTS}int use_imports(void) {{\n{calls}  return 0;\n}}\n")
    out = tmp_path / f"{name}.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-z,noexecstack", str(source), "-o", str(out)], check=True
    )
    return out.read_bytes()


@pytest.fixture(scope="module")
def runtime(cuda_libs: dict[str, Path]) -> slim_cuda.Runtime:
    return slim_cuda.Runtime(cuda_libs["runner"])


def load_error(rt: slim_cuda.Runtime, blob: bytes, device: int = 0) -> slim_cuda.SlimCudaError:
    with pytest.raises(slim_cuda.SlimCudaError) as caught:
        rt.load(blob, device)
    return caught.value


def test_cpu_blob_is_refused_as_wrong_device(runtime: slim_cuda.Runtime, tmp_path: Path) -> None:
    config = load_config()
    blob = fake_blob(tmp_path, "cpu", [config.prefixed("aoti_torch_empty_strided")])
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_DEVICE"
    assert "built for the CPU" in str(err)


def test_unprefixed_blob_is_refused(runtime: slim_cuda.Runtime, tmp_path: Path) -> None:
    blob = fake_blob(tmp_path, "bare", ["aoti_torch_create_cuda_stream_guard"])
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_MISSING_SHIM"
    assert "unprefixed shim aoti_torch_create_cuda_stream_guard" in str(err)


def test_shim_we_do_not_provide_is_refused(runtime: slim_cuda.Runtime, tmp_path: Path) -> None:
    config = load_config()
    missing = config.prefixed("aoti_torch_cuda__fft_c2c")
    blob = fake_blob(
        tmp_path, "fft", [config.prefixed("aoti_torch_create_cuda_stream_guard"), missing]
    )
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_MISSING_SHIM"
    assert missing in str(err)


def test_garbage_and_truncated_blobs(runtime: slim_cuda.Runtime, tmp_path: Path) -> None:
    assert load_error(runtime, b"not an elf").status == "SHIMKIT_E_BAD_BLOB"
    config = load_config()
    blob = fake_blob(tmp_path, "cut", [config.prefixed("aoti_torch_create_cuda_stream_guard")])
    assert load_error(runtime, blob[:200]).status == "SHIMKIT_E_BAD_BLOB"


def test_cuda_blob_without_gpu_or_with_bad_index(
    runtime: slim_cuda.Runtime, tmp_path: Path
) -> None:
    config = load_config()
    blob = fake_blob(tmp_path, "cuda", [config.prefixed("aoti_torch_create_cuda_stream_guard")])
    count = runtime.device_count()
    if count < 0:
        err = load_error(runtime, blob)
        assert err.status == "SHIMKIT_E_DEVICE"
        assert "CUDA unavailable" in str(err) and runtime.unavailable_reason() in str(err)
    else:
        err = load_error(runtime, blob, device=count)
        assert err.status == "SHIMKIT_E_DEVICE" and "out of range" in str(err)
    err = load_error(runtime, blob, device=-1)
    assert err.status == "SHIMKIT_E_DEVICE"


def test_no_gpu_means_clear_errors_and_a_working_cpu_path(runtime: slim_cuda.Runtime) -> None:
    if runtime.device_count() >= 0:
        pytest.skip("this machine has a usable GPU")
    reason = runtime.unavailable_reason()
    assert "CUDA" in reason
    with pytest.raises(slim_cuda.SlimCudaError, match="SHIMKIT_E_DEVICE"):
        runtime.h2d_bandwidth(1 << 20, pinned=True)
    # The CPU shims in the same library still allocate and copy.
    config = load_config()
    shims = runtime.shims
    empty = getattr(shims, config.prefixed("aoti_torch_empty_strided"))
    delete = getattr(shims, config.prefixed("aoti_torch_delete_tensor_object"))
    numel = getattr(shims, config.prefixed("aoti_torch_get_numel"))
    sizes = (ctypes.c_int64 * 2)(3, 4)
    handle = ctypes.c_void_p()
    assert empty(2, sizes, None, 6, 0, -1, ctypes.byref(handle)) == 0
    n = ctypes.c_int64()
    assert numel(handle, ctypes.byref(n)) == 0 and n.value == 12
    assert delete(handle) == 0
    # And a CUDA tensor is refused with the reason.
    assert empty(2, sizes, None, 6, 1, 0, ctypes.byref(handle)) != 0
    shims.shimkit_shim_last_error.restype = ctypes.c_char_p
    assert reason in shims.shimkit_shim_last_error().decode()
