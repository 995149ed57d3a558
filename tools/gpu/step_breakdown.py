"""GPU experiment step: where a slim CUDA run's time goes.

No torch in this process. Times, on the GPU, the pieces a blob's run is made of,
through the slim shim library itself (each through ctypes, ~1 us of Python per
call included):

- the fallback GEMMs the blob calls (`cuda_addmm_out` with a row bias,
  `cuda_mm_out`), synchronised after every call and issued back to back;
- convolutions (`cuda_convolution`): a tiny one, whose GPU time is a few
  microseconds, so that issued back to back its figure is the host's cost per
  call, and a ResNet-18 stage-1 one, NCHW and channels_last, with bias; run
  once with cuDNN's graph API (default) and once with SHIMKIT_CUDNN_API=legacy;
- a device tensor's allocation and release (the caching allocator);
- a stream synchronisation alone;
- the whole MLP blob run, synchronised after every run and only at the end
  (SHIMKIT_BENCH_SYNC=end): with the latter, a host-bound run shows its
  issue cost.

    python3 step_breakdown.py BUILD_DIR BLOB_DIR OUT_JSON
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shimkit.config import load_config
from shimkit.runtime.build import CUDA_RUNTIME_LIB, CUDA_SHIMS_LIB, RuntimeLibs
from shimkit.runtime.cuda import CudaRuntime, cuda_runtime

I64, I32 = ctypes.c_int64, ctypes.c_int32
F32, CUDA = 6, 1
N = 2000


def per_call_us(fn: Callable[[], object], sync: Callable[[], object], each: bool) -> float:
    for _ in range(50):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(N):
        fn()
        if each:
            sync()
    sync()
    return round((time.perf_counter() - start) / N * 1e6, 2)


def shim_pieces(rt: CudaRuntime) -> dict[str, Any]:
    config = load_config()
    shims = rt.lib  # the runner's handle reaches the shim library it depends on

    def fn(name: str) -> Any:
        return getattr(shims, config.prefixed(name))

    def tensor(sizes: tuple[int, ...], strides: tuple[int, ...]) -> ctypes.c_void_p:
        h = ctypes.c_void_p()
        n = len(sizes)
        rc = fn("aoti_torch_empty_strided")(
            I64(n), (I64 * n)(*sizes), (I64 * n)(*strides), I32(F32), I32(CUDA), I32(0),
            ctypes.byref(h),
        )  # fmt: skip
        if rc != 0:
            shims.shimkit_shim_last_error.restype = ctypes.c_char_p
            raise RuntimeError(shims.shimkit_shim_last_error().decode())
        return h

    x = tensor((8, 256), (256, 1))
    w_t = tensor((256, 512), (1, 256))  # a linear weight [512, 256] seen transposed
    bias = tensor((512,), (1,))
    out = tensor((8, 512), (512, 1))
    addmm, mm = fn("aoti_torch_cuda_addmm_out"), fn("aoti_torch_cuda_mm_out")
    one = ctypes.c_double(1.0)
    sync = lambda: shims.shimkit_cuda_synchronize(I32(0))  # noqa: E731
    sizes, strides = (I64 * 2)(8, 512), (I64 * 2)(512, 1)
    empty, delete = fn("aoti_torch_empty_strided"), fn("aoti_torch_delete_tensor_object")

    def alloc_free() -> None:
        h = ctypes.c_void_p()
        empty(I64(2), sizes, strides, I32(F32), I32(CUDA), I32(0), ctypes.byref(h))
        delete(h)

    r: dict[str, Any] = {}
    for each in (True, False):
        tag = "sync_each" if each else "back_to_back"
        r[f"addmm_row_bias_{tag}_us"] = per_call_us(
            lambda: addmm(out, bias, x, w_t, one, one), sync, each
        )
        r[f"mm_{tag}_us"] = per_call_us(lambda: mm(out, x, w_t), sync, each)
    # A GEMM with next to no GPU work: back to back, this is the host's cost per call.
    tiny_a, tiny_out = tensor((8, 8), (8, 1)), tensor((8, 8), (8, 1))
    r["mm_8x8x8_back_to_back_us"] = per_call_us(lambda: mm(tiny_out, tiny_a, tiny_a), sync, False)
    r["alloc_free_us"] = per_call_us(alloc_free, lambda: None, False)
    r["sync_alone_us"] = per_call_us(lambda: None, sync, True)
    noop = shims.shimkit_cuda_cached_bytes
    r["ctypes_call_us"] = per_call_us(lambda: noop(), lambda: None, False)
    conv = fn("aoti_torch_cuda_convolution")
    one2, zero2 = (I64 * 2)(1, 1), (I64 * 2)(0, 0)

    def conv_case(x_shape: tuple[int, ...], w_shape: tuple[int, ...], last: bool) -> Any:
        def strides(shape: tuple[int, ...]) -> tuple[int, ...]:
            _, c, h, w = shape
            return (c * h * w, 1, w * c, c) if last else (c * h * w, h * w, w, 1)

        x, w = tensor(x_shape, strides(x_shape)), tensor(w_shape, strides(w_shape))
        b = tensor((w_shape[0],), (1,))
        pad = (I64 * 2)(w_shape[2] // 2, w_shape[3] // 2)

        def once() -> None:
            y = ctypes.c_void_p()
            rc = conv(x, w, ctypes.byref(b), one2, I64(2), pad, I64(2), one2, I64(2), I32(0),
                      zero2, I64(2), I64(1), ctypes.byref(y))  # fmt: skip
            if rc != 0:
                raise RuntimeError(shims.shimkit_shim_last_error().decode())
            delete(y)

        return once

    shims.shimkit_shim_last_error.restype = ctypes.c_char_p
    cases = {
        "conv_tiny_8x8": ((1, 8, 8, 8), (8, 8, 3, 3), False),
        "conv_resnet_56x56_nchw": ((1, 64, 56, 56), (64, 64, 3, 3), False),
        "conv_resnet_56x56_channels_last": ((1, 64, 56, 56), (64, 64, 3, 3), True),
    }
    for name, (xs, ws, last) in cases.items():
        try:
            once = conv_case(xs, ws, last)
            for each in (True, False):
                tag = "sync_each" if each else "back_to_back"
                r[f"{name}_{tag}_us"] = per_call_us(once, sync, each)
        except RuntimeError as exc:
            r[f"{name}_error"] = str(exc)
    r["conv_api_counts"] = list(rt.conv_api_counts())
    r["conv_counts"] = list(rt.conv_counts())
    r["cudnn"] = rt.cudnn_info()
    return r


def model_runs(build: Path, blobs: Path) -> dict[str, Any]:
    """The MLP blob's run, timed in C (shimkit_cuda_model_bench), in two child processes."""
    if not (blobs / "mlp.so").exists():
        return {"error": "no MLP blob"}
    code = (
        "import sys, numpy as np\n"
        "from shimkit.runtime.blob import read_blob\n"
        "from shimkit.runtime.cuda import CudaModel\n"
        "ref = np.load(sys.argv[2])\n"
        "inputs = [ref[k] for k in sorted(ref.files) if k.startswith('in')]\n"
        "m = CudaModel(read_blob(sys.argv[1]), 0)\n"
        "m.bench(*inputs, iterations=50)\n"
        "print(round(m.bench(*inputs, iterations=2000) / 1e3, 2))\n"
    )
    r: dict[str, Any] = {}
    for mode in ("each", "end"):
        env = dict(os.environ, SHIMKIT_BENCH_SYNC=mode, SHIMKIT_LIB_DIR=str(build))
        done = subprocess.run(
            [sys.executable, "-c", code, str(blobs / "mlp.so"), str(blobs / "mlp.npz")],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        key = f"mlp_run_sync_{mode}_us"
        r[key] = float(done.stdout.split()[-1]) if done.returncode == 0 else done.stderr[-500:]
    return r


def main() -> int:
    build, blobs, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    rt = cuda_runtime(RuntimeLibs(build / CUDA_SHIMS_LIB, build / CUDA_RUNTIME_LIB))
    report: dict[str, Any] = {"shim_pieces": shim_pieces(rt)}
    if "--no-model" not in sys.argv:
        report["model"] = model_runs(build, blobs)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
