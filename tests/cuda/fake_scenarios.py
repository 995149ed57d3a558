"""Scenarios run against the slim CUDA shims with the fake CUDA runtime and cuBLAS.

Run in a child process (the shims read their environment once):
    python fake_scenarios.py SHIMS_SO SCENARIO
and print one JSON object. tests/cuda/test_cuda_fake.py drives it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

import numpy as np
from shimkit.config import load_config

I64 = ctypes.c_int64
I32 = ctypes.c_int32
F32 = 6
CPU, CUDA = 0, 1


class Shims:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
        self.config = load_config()
        self.keep: list[Any] = []
        self.lib.shimkit_shim_last_error.restype = ctypes.c_char_p

    def fn(self, name: str) -> Any:
        return getattr(self.lib, self.config.prefixed(name))

    def error(self) -> str:
        return self.lib.shimkit_shim_last_error().decode()

    def call(self, name: str, *args: Any) -> None:
        if self.fn(name)(*args) != 0:
            raise RuntimeError(f"{name}: {self.error()}")

    def host(self, arr: np.ndarray) -> ctypes.c_void_p:
        self.keep.append(arr)
        sizes = (I64 * max(arr.ndim, 1))(*arr.shape)
        strides = (I64 * max(arr.ndim, 1))(*[s // arr.itemsize for s in arr.strides])
        h = ctypes.c_void_p()
        self.call(
            "aoti_torch_create_tensor_from_blob",
            ctypes.c_void_p(arr.ctypes.data), I64(arr.ndim), sizes, strides, I64(0),
            I32(F32), I32(CPU), I32(-1), ctypes.byref(h),
        )  # fmt: skip
        return h

    def empty(self, shape: tuple[int, ...], strides: tuple[int, ...] | None, device: int) -> Any:
        sizes = (I64 * max(len(shape), 1))(*shape)
        st = (I64 * max(len(shape), 1))(*strides) if strides is not None else None
        h = ctypes.c_void_p()
        self.call(
            "aoti_torch_empty_strided", I64(len(shape)), sizes, st, I32(F32), I32(CUDA),
            I32(device), ctypes.byref(h),
        )  # fmt: skip
        return h

    def device(self, arr: np.ndarray, device: int = 0) -> Any:
        """A CUDA tensor with arr's values and element strides."""
        strides = tuple(s // arr.itemsize for s in arr.strides)
        h = self.empty(arr.shape, strides, device)
        self.call("aoti_torch_copy_", h, self.host(arr), I32(0))
        return h

    def meta(self, h: Any) -> tuple[list[int], list[int]]:
        ndim = I64()
        self.call("aoti_torch_get_dim", h, ctypes.byref(ndim))
        sizes = ctypes.POINTER(I64)()
        strides = ctypes.POINTER(I64)()
        self.call("aoti_torch_get_sizes", h, ctypes.byref(sizes))
        self.call("aoti_torch_get_strides", h, ctypes.byref(strides))
        return [sizes[i] for i in range(ndim.value)], [strides[i] for i in range(ndim.value)]

    def numpy(self, h: Any) -> np.ndarray:
        shape, _ = self.meta(h)
        out = np.zeros(shape, dtype=np.float32)
        self.call("aoti_torch_copy_", self.host(out), h, I32(0))
        return out


def counter(name: str) -> int:
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUDART"])
    fake.fake_cuda_counter.restype = ctypes.c_long
    return int(fake.fake_cuda_counter(name.encode()))


def basics(s: Shims) -> dict[str, Any]:
    r: dict[str, Any] = {"devices": s.lib.shimkit_cuda_device_count()}
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = s.device(a)
    r["roundtrip"] = bool(np.array_equal(s.numpy(d), a))
    dt = s.device(np.ascontiguousarray(a.T).T)  # column-major on the device
    r["colmajor_strides"] = s.meta(dt)[1]
    clone = ctypes.c_void_p()
    s.call("aoti_torch_clone", dt, ctypes.byref(clone))
    r["clone_strides"] = s.meta(clone)[1]
    r["clone_values"] = bool(np.array_equal(s.numpy(clone), a))
    s.call("aoti_torch_zero_", clone)
    r["zeroed"] = bool(not s.numpy(clone).any())
    before = counter("host_alloc")
    pinned = ctypes.c_void_p()
    sizes = (I64 * 1)(1024)
    s.call("aoti_torch_empty_strided_pinned", I64(1), sizes, None, I32(F32), I32(CPU), I32(-1),
           ctypes.byref(pinned))  # fmt: skip
    r["pinned_host_allocs"] = counter("host_alloc") - before
    try:
        s.empty((4,), None, s.lib.shimkit_cuda_device_count())
        r["out_of_range"] = "accepted"
    except RuntimeError as exc:
        r["out_of_range"] = str(exc)
    guard = ctypes.c_void_p()
    index = I32()
    s.call("aoti_torch_create_cuda_guard", I32(1), ctypes.byref(guard))
    s.call("aoti_torch_get_current_device_index", ctypes.byref(index))
    r["inside_guard"] = index.value
    s.call("aoti_torch_delete_cuda_guard", guard)
    s.call("aoti_torch_get_current_device_index", ctypes.byref(index))
    r["after_guard"] = index.value
    sg = ctypes.c_void_p()
    stream = ctypes.c_void_p()
    s.call("aoti_torch_create_cuda_stream_guard", ctypes.c_void_p(0x1234), I32(0), ctypes.byref(sg))
    s.call("aoti_torch_get_current_cuda_stream", I32(0), ctypes.byref(stream))
    r["stream_inside"] = stream.value
    s.call("aoti_torch_delete_cuda_stream_guard", sg)
    s.call("aoti_torch_get_current_cuda_stream", I32(0), ctypes.byref(stream))
    r["stream_after"] = stream.value
    return r


def caching(s: Shims) -> dict[str, Any]:
    before = counter("malloc")
    for _ in range(10):
        h = s.empty((256,), None, 0)
        s.call("aoti_torch_delete_tensor_object", h)
    return {"mallocs": counter("malloc") - before, "cached": s.lib.shimkit_cuda_cached_bytes()}


def matmul(s: Shims) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7), dtype=np.float32)
    w = rng.standard_normal((3, 7), dtype=np.float32)  # linear weight [N, K]
    bias = rng.standard_normal(3, dtype=np.float32)
    full = rng.standard_normal((5, 3), dtype=np.float32)
    r: dict[str, Any] = {}
    out = s.empty((5, 3), None, 0)
    s.call("aoti_torch_cuda_mm_out", out, s.device(x), s.device(w.T))  # mat2 column-major
    r["mm_wT"] = float(np.abs(s.numpy(out) - x @ w.T).max())
    s.call("aoti_torch_cuda_addmm_out", out, s.device(bias), s.device(x), s.device(w.T),
           ctypes.c_double(1.0), ctypes.c_double(1.0))  # fmt: skip
    r["addmm_row_bias"] = float(np.abs(s.numpy(out) - (x @ w.T + bias)).max())
    s.call("aoti_torch_cuda_addmm_out", out, s.device(full), s.device(x), s.device(w.T),
           ctypes.c_double(0.5), ctypes.c_double(2.0))  # fmt: skip
    r["addmm_full_bias"] = float(np.abs(s.numpy(out) - (2.0 * (x @ w.T) + 0.5 * full)).max())
    xt = np.ascontiguousarray(x.T).T  # mat1 column-major
    s.call("aoti_torch_cuda_mm_out", out, s.device(xt), s.device(np.ascontiguousarray(w.T)))
    r["mm_xT"] = float(np.abs(s.numpy(out) - x @ w.T).max())
    a = rng.standard_normal((4, 5, 6), dtype=np.float32)
    b = rng.standard_normal((4, 6, 2), dtype=np.float32)
    bout = s.empty((4, 5, 2), None, 0)
    s.call("aoti_torch_cuda_bmm_out", bout, s.device(a), s.device(b))
    r["bmm"] = float(np.abs(s.numpy(bout) - a @ b).max())
    return r


def fallbacks(s: Shims) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 8), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    stride = (I64 * 2)(1, 1)
    padding = (I64 * 2)(1, 1)
    dilation = (I64 * 2)(1, 1)
    outpad = (I64 * 2)(0, 0)
    r: dict[str, Any] = {}
    outs = {}
    for dev, (xi, wi) in (("cpu", (s.host(x), s.host(w))), ("cuda", (s.device(x), s.device(w)))):
        y = ctypes.c_void_p()
        name = f"aoti_torch_{dev}_convolution"
        s.call(name, xi, wi, None, stride, I64(2), padding, I64(2), dilation, I64(2), I32(0),
               outpad, I64(2), I64(1), ctypes.byref(y))  # fmt: skip
        dtype = I32()
        s.call("aoti_torch_get_device_type", y, ctypes.byref(dtype))
        r[f"conv_{dev}_device"] = dtype.value
        outs[dev] = s.numpy(y)
    r["conv_diff"] = float(np.abs(outs["cpu"] - outs["cuda"]).max())
    v = rng.standard_normal((3, 10), dtype=np.float32)
    values, indices = ctypes.c_void_p(), ctypes.c_void_p()
    s.call("aoti_torch_cuda_topk", s.device(v), I64(4), I64(1), I32(1), I32(1),
           ctypes.byref(values), ctypes.byref(indices))  # fmt: skip
    r["topk_diff"] = float(np.abs(s.numpy(values) - -np.sort(-v, axis=1)[:, :4]).max())
    return r


def double_free(s: Shims) -> dict[str, Any]:
    """Deletes one tensor twice: the sanitizer's negative control (must abort)."""
    h = s.empty((8,), None, 0)
    s.call("aoti_torch_delete_tensor_object", h)
    s.call("aoti_torch_delete_tensor_object", h)
    return {"survived": True}


SCENARIOS = {
    "double_free": double_free,
    "basics": basics,
    "caching": caching,
    "matmul": matmul,
    "fallbacks": fallbacks,
}

if __name__ == "__main__":
    shims = Shims(sys.argv[1])
    print(json.dumps(SCENARIOS[sys.argv[2]](shims)))
