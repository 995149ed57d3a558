"""Scenarios run against the slim CUDA shims with the fake CUDA runtime and cuBLAS.

Run in a child process (the shims read their environment once):
    python fake_scenarios.py SHIMS_SO SCENARIO
and print one JSON object. tests/cuda/test_cuda_fake.py drives it.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import sys
from typing import Any

import numpy as np
from shimkit.config import load_config

I64 = ctypes.c_int64
I32 = ctypes.c_int32
F64 = ctypes.c_double
F32 = 6
I64_CODE = 4
BOOL_CODE = 11
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

    def host(self, arr: np.ndarray, dtype: int = F32) -> ctypes.c_void_p:
        """A CPU tensor over arr's memory; `dtype` is the shims' code for its elements
        (bfloat16 arrays are uint16 bit patterns)."""
        self.keep.append(arr)
        sizes = (I64 * max(arr.ndim, 1))(*arr.shape)
        strides = (I64 * max(arr.ndim, 1))(*[s // arr.itemsize for s in arr.strides])
        h = ctypes.c_void_p()
        self.call(
            "aoti_torch_create_tensor_from_blob",
            ctypes.c_void_p(arr.ctypes.data), I64(arr.ndim), sizes, strides, I64(0),
            I32(dtype), I32(CPU), I32(-1), ctypes.byref(h),
        )  # fmt: skip
        return h

    def empty(
        self, shape: tuple[int, ...], strides: tuple[int, ...] | None, device: int, dtype: int = F32
    ) -> Any:
        sizes = (I64 * max(len(shape), 1))(*shape)
        st = (I64 * max(len(shape), 1))(*strides) if strides is not None else None
        h = ctypes.c_void_p()
        self.call(
            "aoti_torch_empty_strided", I64(len(shape)), sizes, st, I32(dtype), I32(CUDA),
            I32(device), ctypes.byref(h),
        )  # fmt: skip
        return h

    def device(self, arr: np.ndarray, device: int = 0, dtype: int = F32) -> Any:
        """A CUDA tensor with arr's values and element strides."""
        strides = tuple(s // arr.itemsize for s in arr.strides)
        h = self.empty(arr.shape, strides, device, dtype)
        self.call("aoti_torch_copy_", h, self.host(arr, dtype), I32(0))
        return h

    def meta(self, h: Any) -> tuple[list[int], list[int]]:
        ndim = I64()
        self.call("aoti_torch_get_dim", h, ctypes.byref(ndim))
        sizes = ctypes.POINTER(I64)()
        strides = ctypes.POINTER(I64)()
        self.call("aoti_torch_get_sizes", h, ctypes.byref(sizes))
        self.call("aoti_torch_get_strides", h, ctypes.byref(strides))
        return [sizes[i] for i in range(ndim.value)], [strides[i] for i in range(ndim.value)]

    def numpy(self, h: Any, like: Any = np.float32, dtype: int = F32) -> np.ndarray:
        shape, _ = self.meta(h)
        out = np.zeros(shape, dtype=like)
        self.call("aoti_torch_copy_", self.host(out, dtype), h, I32(0))
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
    # check_inf_and_nan reads a device tensor through its hooks' copy to the host.
    s.call("aoti_torch_check_inf_and_nan", b"clean", clone)
    bad = a.copy()
    bad[1, 2] = np.nan
    try:
        s.call("aoti_torch_check_inf_and_nan", b"buf7", s.device(bad))
        r["nan_on_device"] = "passed"
    except RuntimeError as exc:
        r["nan_on_device"] = str(exc)
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
    # The row bias expanded over the rows (row stride 0), as Inductor's autotuned addmm
    # passes it: the epilogue's bias too, not a copy through the host.
    expanded, dx, dw = s.device(np.broadcast_to(bias, (5, 3))), s.device(x), s.device(w.T)
    copies = counter("copy")
    s.call("aoti_torch_cuda_addmm_out", out, expanded, dx, dw, ctypes.c_double(1.0),
           ctypes.c_double(1.0))  # fmt: skip
    copied_expanded = counter("copy") - copies
    r["addmm_expanded_bias"] = float(np.abs(s.numpy(out) - (x @ w.T + bias)).max())
    xt = np.ascontiguousarray(x.T).T  # mat1 column-major
    s.call("aoti_torch_cuda_mm_out", out, s.device(xt), s.device(np.ascontiguousarray(w.T)))
    r["mm_xT"] = float(np.abs(s.numpy(out) - x @ w.T).max())
    a = rng.standard_normal((4, 5, 6), dtype=np.float32)
    b = rng.standard_normal((4, 6, 2), dtype=np.float32)
    bout = s.empty((4, 5, 2), None, 0)
    s.call("aoti_torch_cuda_bmm_out", bout, s.device(a), s.device(b))
    r["bmm"] = float(np.abs(s.numpy(bout) - a @ b).max())
    # One row per batch read with a step (element strides 30, 1, 5), as an einsum that
    # contracts over a permuted dim hands it over: a column-major [1, 6] matrix.
    rows = rng.standard_normal((4, 6, 5), dtype=np.float32).transpose(0, 2, 1)[:, :1, :]
    vout, drows, db = s.empty((4, 1, 2), None, 0), s.device(rows), s.device(b)
    copies = counter("copy")
    s.call("aoti_torch_cuda_bmm_out", vout, drows, db)
    copied_rows = counter("copy") - copies
    r["bmm_strided_row"] = float(np.abs(s.numpy(vout) - rows @ b).max())
    on_lt, on_cublas = I64(), I64()
    s.lib.shimkit_cuda_gemm_counts(ctypes.byref(on_lt), ctypes.byref(on_cublas))
    lt_path = os.environ.get("SHIMKIT_CUBLASLT", "")
    lt_matmuls = 0
    if os.path.isfile(lt_path):
        fake = ctypes.CDLL(lt_path)
        fake.fake_cublaslt_counter.restype = ctypes.c_long
        lt_matmuls = int(fake.fake_cublaslt_counter(b"matmul"))
    r["gemm_counts"] = {
        "cublaslt": on_lt.value,
        "cublas": on_cublas.value,
        "lt_matmuls": lt_matmuls,
    }
    # Copies made by the two calls above (through the host, they would be some).
    r["gemm_counts"]["copies"] = {
        "addmm_expanded_bias": copied_expanded,
        "bmm_strided_row": copied_rows,
    }
    return r


F16, BF16 = 5, 15


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (round to nearest even), as uint16."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def matmul_half(s: Shims) -> dict[str, Any]:
    """mm, addmm (row bias) and bmm on float16 and bfloat16 CUDA tensors against float64
    numpy of the same (rounded) inputs; relative error, and where each GEMM ran."""
    rng = np.random.default_rng(4)
    r: dict[str, Any] = {}
    for name, code, encode, decode, storage in (
        (
            "float16",
            F16,
            lambda a: a.astype(np.float16),
            lambda a: a.astype(np.float64),
            np.float16,
        ),
        ("bfloat16", BF16, to_bf16, lambda a: from_bf16(a).astype(np.float64), np.uint16),
    ):
        x, w = encode(rng.standard_normal((5, 8))), encode(rng.standard_normal((3, 8)))
        bias = encode(rng.standard_normal(3))
        a, b = encode(rng.standard_normal((4, 5, 6))), encode(rng.standard_normal((4, 6, 2)))
        xd, wd, bd = decode(x), decode(w), decode(bias)
        out = s.empty((5, 3), None, 0, code)
        errors = {}
        s.call("aoti_torch_cuda_mm_out", out, s.device(x, dtype=code), s.device(w.T, dtype=code))
        errors["mm"] = decode(s.numpy(out, storage, code)) - xd @ wd.T
        s.call("aoti_torch_cuda_addmm_out", out, s.device(bias, dtype=code),
               s.device(x, dtype=code), s.device(w.T, dtype=code), ctypes.c_double(1.0),
               ctypes.c_double(1.0))  # fmt: skip
        errors["addmm"] = decode(s.numpy(out, storage, code)) - (xd @ wd.T + bd)
        bout = s.empty((4, 5, 2), None, 0, code)
        s.call("aoti_torch_cuda_bmm_out", bout, s.device(a, dtype=code), s.device(b, dtype=code))
        errors["bmm"] = decode(s.numpy(bout, storage, code)) - decode(a) @ decode(b)
        for op, err in errors.items():
            r[f"{name}_{op}"] = float(np.abs(err).max())
    on_lt, on_cublas = I64(), I64()
    s.lib.shimkit_cuda_gemm_counts(ctypes.byref(on_lt), ctypes.byref(on_cublas))
    r["gemm_counts"] = {"cublaslt": on_lt.value, "cublas": on_cublas.value}
    return r


def blas_counter(name: str) -> int:
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUBLAS"])
    fake.fake_cublas_counter.restype = ctypes.c_long
    return int(fake.fake_cublas_counter(name.encode()))


def lt_counter(name: str) -> int:
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUBLASLT"])
    fake.fake_cublaslt_counter.restype = ctypes.c_long
    return int(fake.fake_cublaslt_counter(name.encode()))


def autotune(s: Shims) -> dict[str, Any]:
    """Twenty identical mms and two addmms reading their output: how often the slow algorithm
    (ranked first by the fake's heuristic) ran."""
    x = s.device(np.ones((4, 8), dtype=np.float32))
    w = s.device(np.ones((8, 6), dtype=np.float32))
    out = s.empty((4, 6), None, 0)
    for _ in range(20):
        s.call("aoti_torch_cuda_mm_out", out, x, w)
    r: dict[str, Any] = {"slow_runs_mm": lt_counter("matmul_slow")}
    r["mm_ok"] = bool(np.array_equal(s.numpy(out), np.full((4, 6), 8.0, np.float32)))
    full = s.device(np.ones((4, 6), dtype=np.float32))
    for _ in range(2):  # beta != 0 reads `out`: never timed, the heuristic's first choice runs
        s.call("aoti_torch_cuda_addmm_out", out, full, x, w, ctypes.c_double(1.0),
               ctypes.c_double(1.0))  # fmt: skip
    r["addmm_ok"] = bool(np.array_equal(s.numpy(out), np.full((4, 6), 9.0, np.float32)))
    return r


def graph_counter(name: str) -> int:
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUDART"])
    fake.fake_cuda_graph_counter.restype = ctypes.c_long
    return int(fake.fake_cuda_graph_counter(name.encode()))


def data_ptr(s: Shims, h: Any) -> int:
    p = ctypes.c_void_p()
    s.call("aoti_torch_get_data_ptr", h, ctypes.byref(p))
    return int(p.value or 0)


def open_guarded_stream(s: Shims) -> tuple[Any, Any]:
    """A new stream on device 0 and a guard making it the current stream."""
    stream = ctypes.c_void_p()
    assert s.lib.shimkit_cuda_stream_create(I32(0), ctypes.byref(stream)) == 0, s.error()
    guard = ctypes.c_void_p()
    s.call("aoti_torch_create_cuda_stream_guard", stream, I32(0), ctypes.byref(guard))
    return stream, guard


def close_guarded_stream(s: Shims, stream: Any, guard: Any) -> None:
    s.call("aoti_torch_delete_cuda_stream_guard", guard)
    assert s.lib.shimkit_cuda_stream_destroy(stream) == 0, s.error()


def graph_pools(s: Shims) -> dict[str, Any]:
    """A capture's allocations come from a private pool: freed inside the capture, a block is
    reused only by that capture, never outside it, until the graph is freed."""
    lib = s.lib
    r: dict[str, Any] = {}
    stream, guard = open_guarded_stream(s)
    # Control: outside any capture a freed block comes straight back.
    a = s.empty((64,), None, 0)
    first = data_ptr(s, a)
    s.call("aoti_torch_delete_tensor_object", a)
    b = s.empty((64,), None, 0)
    r["common_pool_reuses"] = data_ptr(s, b) == first
    s.call("aoti_torch_delete_tensor_object", b)
    pool = ctypes.c_uint64()
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    inside = s.empty((64,), None, 0)  # a new block: the common pool's is not taken
    in_ptr = data_ptr(s, inside)
    r["capture_took_common_block"] = in_ptr == first
    s.call("aoti_torch_delete_tensor_object", inside)
    again = s.empty((64,), None, 0)  # inside the same capture: reused
    r["capture_reuses_its_own"] = data_ptr(s, again) == in_ptr
    s.call("aoti_torch_delete_tensor_object", again)
    exec_ = ctypes.c_void_p()
    assert lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) == 0, s.error()
    after = s.empty((64,), None, 0)  # outside: never the graph's block
    r["outside_took_graph_block"] = data_ptr(s, after) == in_ptr
    s.call("aoti_torch_delete_tensor_object", after)
    assert lib.shimkit_cuda_graph_launch(exec_, pool, stream) == 0, s.error()
    r["launches"] = graph_counter("launches")
    frees = counter("free")
    assert lib.shimkit_cuda_graph_free(exec_, pool, stream) == 0, s.error()
    r["pool_blocks_freed"] = counter("free") - frees
    r["live_execs"] = graph_counter("execs")
    close_guarded_stream(s, stream, guard)
    r["live_streams"] = graph_counter("streams")
    return r


F64_CODE = 7


def captured_host_steps(s: Shims) -> dict[str, Any]:
    """Host fallbacks under a capture: topk (new results), mm on float64 (into `out`, the
    host path: cuBLASLt takes no float64) and index_reduce become host steps. The capture
    runs no CPU op on the inputs and synchronises nothing; each launch computes from the
    inputs as they are then. A replay whose step fails reports it at the next check."""
    lib = s.lib
    r: dict[str, Any] = {}
    rng = np.random.default_rng(11)
    stream, guard = open_guarded_stream(s)
    x = s.empty((4, 6), None, 0)
    a = s.empty((3, 5), None, 0, F64_CODE)
    b = s.empty((5, 2), None, 0, F64_CODE)
    product = s.empty((3, 2), None, 0, F64_CODE)
    table = s.empty((4, 3), None, 0)
    index = s.empty((2,), None, 0, I64_CODE)
    rows = s.empty((2, 3), None, 0)

    def fill(h: Any, arr: np.ndarray, dtype: int = F32) -> None:
        s.call("aoti_torch_copy_", h, s.host(arr, dtype), I32(0))

    def inputs(idx: np.ndarray) -> dict[str, np.ndarray]:
        v = {
            "x": rng.standard_normal((4, 6)).astype(np.float32),
            "a": rng.standard_normal((3, 5)),
            "b": rng.standard_normal((5, 2)),
            "table": rng.standard_normal((4, 3)).astype(np.float32),
            "index": idx,
            "rows": rng.standard_normal((2, 3)).astype(np.float32),
        }
        fill(x, v["x"])
        fill(a, v["a"], F64_CODE)
        fill(b, v["b"], F64_CODE)
        fill(table, v["table"])
        fill(index, v["index"], I64_CODE)
        fill(rows, v["rows"])
        return v

    inputs(np.array([1, 3], dtype=np.int64))
    count = s.device(np.array([5], dtype=np.int64), dtype=I64_CODE)  # a size in the data
    syncs, host_allocs = counter("sync"), counter("host_alloc")
    pool = ctypes.c_uint64()
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    values, indices, reduced = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    s.call("aoti_torch_cuda_topk", x, I64(2), I64(1), I32(1), I32(1), ctypes.byref(values),
           ctypes.byref(indices))  # fmt: skip
    s.call("aoti_torch_cuda_mm_out", product, a, b)
    s.call("aoti_torch_cuda_index_reduce", table, I64(0), index, rows, b"amax", I32(1),
           ctypes.byref(reduced))  # fmt: skip
    r["capture_syncs"] = counter("sync") - syncs
    r["pinned_buffers"] = counter("host_alloc") - host_allocs
    try:  # nonzero's result size depends on the data: refused under capture
        s.call("aoti_torch_cuda_nonzero", x, ctypes.byref(ctypes.c_void_p()))
        r["nonzero_under_capture"] = "captured"
    except RuntimeError as exc:
        r["nonzero_under_capture"] = str(exc)
    try:  # a device value read on the host (.item(), a size from the data) would wait
        s.call("aoti_torch_item_int64", count, ctypes.byref(ctypes.c_int64()))
        r["item_under_capture"] = "captured"
    except RuntimeError as exc:
        r["item_under_capture"] = str(exc)
    exec_ = ctypes.c_void_p()
    assert lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) == 0, s.error()
    lib.shimkit_cuda_graph_host_steps.restype = ctypes.c_int64
    r["host_steps"] = lib.shimkit_cuda_graph_host_steps(pool)
    names = lib.shimkit_cuda_graph_host_step_names
    names.restype = ctypes.c_int64
    names.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int64]
    buffer = ctypes.create_string_buffer(64)
    r["host_step_names_length"] = names(pool, buffer, 64)
    r["host_step_names"] = buffer.value.decode()
    short = ctypes.create_string_buffer(8)
    names(pool, short, 8)  # cut to the buffer, NUL-terminated
    r["host_step_names_cut"] = short.value.decode()
    r["topk_geometry"] = [s.meta(values)[0], s.meta(indices)[0]]

    r["replays_ok"] = []
    for idx in ([1, 3], [0, 0]):  # new values each time, and a repeated index
        v = inputs(np.array(idx, dtype=np.int64))
        assert lib.shimkit_cuda_graph_launch(exec_, pool, stream) == 0, s.error()
        assert lib.shimkit_cuda_stream_synchronize(stream) == 0, s.error()
        r["replays_ok"].append(lib.shimkit_cuda_graph_check(pool) == 0)
        want_idx = np.argsort(-v["x"], axis=1, kind="stable")[:, :2]
        want_table = v["table"].copy()
        for row, i in zip(v["rows"], v["index"], strict=True):
            want_table[i] = np.maximum(want_table[i], row)
        r["replays_ok"].append(
            bool(np.array_equal(s.numpy(values), np.take_along_axis(v["x"], want_idx, 1)))
            and bool(np.array_equal(s.numpy(indices, np.int64, I64_CODE), want_idx))
            and bool(np.allclose(s.numpy(product, np.float64, F64_CODE), v["a"] @ v["b"]))
            and bool(np.array_equal(s.numpy(reduced), want_table))
        )
    inputs(np.array([1, 9], dtype=np.int64))  # row 9 of 4: the CPU op refuses it
    assert lib.shimkit_cuda_graph_launch(exec_, pool, stream) == 0, s.error()
    assert lib.shimkit_cuda_stream_synchronize(stream) == 0, s.error()
    r["bad_index_check"] = s.error() if lib.shimkit_cuda_graph_check(pool) != 0 else "passed"
    r["check_after_report"] = lib.shimkit_cuda_graph_check(pool) == 0  # reported once
    assert lib.shimkit_cuda_graph_free(exec_, pool, stream) == 0, s.error()
    r["live_execs"] = graph_counter("execs")
    r["host_steps_after_free"] = lib.shimkit_cuda_graph_host_steps(pool)
    r["host_step_names_after_free"] = names(pool, buffer, 64)
    # Control: the same topk outside a capture synchronises (it copies to the host).
    syncs = counter("sync")
    s.call("aoti_torch_cuda_topk", x, I64(2), I64(1), I32(1), I32(1), ctypes.byref(values),
           ctypes.byref(indices))  # fmt: skip
    r["eager_syncs"] = counter("sync") - syncs
    # Eagerly, an item is the device's value (the fake's), read after the stream.
    item = ctypes.c_int64()
    s.call("aoti_torch_item_int64", count, ctypes.byref(item))
    r["eager_item"] = item.value
    # An event recorded under capture cannot be queried afterwards (what torch's
    # ContainerRun would meet after a capture), one recorded outside can.
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUDART"])
    event = ctypes.c_void_p()
    assert fake.cudaEventCreate(ctypes.byref(event)) == 0
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    fake.cudaEventRecord(event, stream)
    assert lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) == 0, s.error()
    r["query_captured_event"] = fake.cudaEventQuery(event)
    fake.cudaEventRecord(event, stream)
    r["query_event_recorded_after"] = fake.cudaEventQuery(event)
    fake.cudaEventDestroy(event)
    lib.shimkit_cuda_graph_free(exec_, pool, stream)
    # Control: the fake refuses a synchronisation under capture, and the capture is lost.
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    r["sync_under_capture"] = lib.shimkit_cuda_stream_synchronize(stream) == 0
    r["end_after_sync"] = (
        s.error() if lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) != 0 else "ended"
    )
    lib.shimkit_cuda_graph_free(exec_, pool, stream)
    close_guarded_stream(s, stream, guard)
    return r


def captured_random_draws(s: Shims) -> dict[str, Any]:
    """A program's seeds (randint) under a capture are no host step: each launch draws them
    anew and copies them in ahead of the graph, in the generator's order, so after the same
    seed the replays give the eager draws, one launch each. Launching with another pool
    draws nothing for it (control)."""
    lib = s.lib
    r: dict[str, Any] = {}
    stream, guard = open_guarded_stream(s)
    lo, hi, sizes = I64(-(2**63)), I64(2**63 - 1), (I64 * 1)(8)

    def draw_into(h: Any) -> None:
        s.call("aoti_torch_cuda_randint_low_out", h, lo, hi, sizes, I64(1))

    seeds = s.empty((8,), None, 0, I64_CODE)
    lib.shimkit_shim_manual_seed(ctypes.c_uint64(5))
    eager = []
    for _ in range(3):
        draw_into(seeds)
        eager.append(s.numpy(seeds, np.int64, I64_CODE).tolist())
    host_fns = counter("host_fns")
    pool = ctypes.c_uint64()
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    captured = s.empty((8,), None, 0, I64_CODE)
    draw_into(captured)
    exec_ = ctypes.c_void_p()
    assert lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) == 0, s.error()
    lib.shimkit_cuda_graph_host_steps.restype = ctypes.c_int64
    r["host_steps"] = lib.shimkit_cuda_graph_host_steps(pool)
    lib.shimkit_shim_manual_seed(ctypes.c_uint64(5))
    replays = []
    for _ in range(3):
        assert lib.shimkit_cuda_graph_launch(exec_, pool, stream) == 0, s.error()
        assert lib.shimkit_cuda_stream_synchronize(stream) == 0, s.error()
        replays.append(s.numpy(captured, np.int64, I64_CODE).tolist())
    r["host_fns"] = counter("host_fns") - host_fns
    r["replays_are_the_eager_draws"] = replays == eager
    r["distinct_replays"] = len({tuple(draw) for draw in replays})
    # Control: a launch that names another pool copies no new draw in.
    other = ctypes.c_uint64(pool.value + 1000)
    assert lib.shimkit_cuda_graph_launch(exec_, other, stream) == 0, s.error()
    assert lib.shimkit_cuda_stream_synchronize(stream) == 0, s.error()
    r["other_pool_repeats"] = s.numpy(captured, np.int64, I64_CODE).tolist() == replays[-1]
    assert lib.shimkit_cuda_graph_free(exec_, pool, stream) == 0, s.error()
    r["live_execs"] = graph_counter("execs")
    close_guarded_stream(s, stream, guard)
    return r


def blas_binding(s: Shims) -> dict[str, Any]:
    """cuBLAS is bound to a stream (and given a workspace) once per stream, not per GEMM."""
    x = s.device(np.ones((4, 4), dtype=np.float32))
    out = s.empty((4, 4), None, 0)
    for _ in range(5):
        s.call("aoti_torch_cuda_mm_out", out, x, x)
    r = {"one_stream": [blas_counter("set_stream"), blas_counter("set_workspace")]}
    guard = ctypes.c_void_p()
    s.call("aoti_torch_create_cuda_stream_guard", ctypes.c_void_p(0x1234), I32(0),
           ctypes.byref(guard))  # fmt: skip
    for _ in range(3):
        s.call("aoti_torch_cuda_mm_out", out, x, x)
    s.call("aoti_torch_delete_cuda_stream_guard", guard)
    s.call("aoti_torch_cuda_mm_out", out, x, x)
    r["after_two_switches"] = [blas_counter("set_stream"), blas_counter("set_workspace")]
    r["values_ok"] = bool(np.array_equal(s.numpy(out), np.full((4, 4), 4.0, np.float32)))
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
    # Ops with no device kernel: the same shim on CUDA tensors and on the CPU, equal results.
    table = rng.standard_normal((6, 4), dtype=np.float32)
    ids = np.array([0, 2, 2, 5, 1, 3, 4], dtype=np.int64)
    offsets = np.array([0, 3, 5], dtype=np.int64)
    source = rng.standard_normal((4, 3), dtype=np.float32)
    rows = np.array([1, 0, 1, 2], dtype=np.int64)
    scatter_index = np.array([[0, 1, 0], [2, 0, 1]], dtype=np.int64)
    scatter_src = rng.standard_normal((2, 3), dtype=np.float32)
    base = rng.standard_normal((3, 3), dtype=np.float32)
    volume = rng.standard_normal((1, 2, 3, 4, 5), dtype=np.float32)
    grid = rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)
    results: dict[str, list[np.ndarray]] = {}
    for dev, make in (("cpu", s.host), ("cuda", s.device)):
        outs = [ctypes.c_void_p() for _ in range(4)]
        s.call(f"aoti_torch_{dev}__embedding_bag", make(table), make(ids, dtype=I64_CODE),
               make(offsets, dtype=I64_CODE), I32(0), I64(0), I32(0), None, I32(0), I64(-1),
               *[ctypes.byref(o) for o in outs])  # fmt: skip
        reduced = ctypes.c_void_p()
        s.call(f"aoti_torch_{dev}_index_reduce", make(base), I64(0), make(rows, dtype=I64_CODE),
               make(source[:, :3].copy()), b"amax", I32(1), ctypes.byref(reduced))  # fmt: skip
        scattered = make(np.zeros((3, 3), dtype=np.float32))
        s.call(f"aoti_torch_{dev}_scatter_reduce_two_out", scattered, make(base), I64(0),
               make(scatter_index, dtype=I64_CODE), make(scatter_src), b"sum", I32(1))  # fmt: skip
        placed, filled = (make(np.zeros((3, 3), dtype=np.float32)) for _ in range(2))
        s.call(f"aoti_torch_{dev}_scatter_src_out", placed, make(base), I64(0),
               make(scatter_index, dtype=I64_CODE), make(scatter_src))  # fmt: skip
        s.call(f"aoti_torch_{dev}_scatter_value_out", filled, make(base), I64(1),
               make(scatter_index, dtype=I64_CODE), F64(-2.5))  # fmt: skip
        averaged, peaks, peak_at = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        one = I64(1)
        s.call(f"aoti_torch_{dev}_avg_pool2d", make(x), (I64 * 1)(6), one, (I64 * 1)(2), one,
               (I64 * 1)(1), one, I32(1), I32(0), None, ctypes.byref(averaged))  # fmt: skip
        s.call(f"aoti_torch_{dev}_adaptive_max_pool2d", make(x), (I64 * 2)(3, 3), I64(2),
               ctypes.byref(peaks), ctypes.byref(peak_at))  # fmt: skip
        scored = make(np.zeros((2, 3, 4), dtype=np.float32))
        batch1, batch2 = make(x[:, 0, :3, :5].copy()), make(x[:, 1, :5, :4].copy())
        s.call(f"aoti_torch_{dev}_baddbmm_out", scored, make(base[:, :1].copy()), batch1, batch2,
               F64(0.5), F64(2.0))  # fmt: skip
        nonzero, selected, running, running_at = (ctypes.c_void_p() for _ in range(4))
        positive = make((base > 0).astype(np.bool_), dtype=BOOL_CODE)
        s.call(f"aoti_torch_{dev}_nonzero", positive, ctypes.byref(nonzero))
        s.call(f"aoti_torch_{dev}_masked_select", make(base), positive, ctypes.byref(selected))
        s.call(f"aoti_torch_{dev}_cummax", make(base), I64(1), ctypes.byref(running),
               ctypes.byref(running_at))  # fmt: skip
        distances = ctypes.c_void_p()
        s.call(f"aoti_torch_{dev}__cdist_forward", make(base), make(table[:, :3].copy()), F64(2.0),
               None, ctypes.byref(distances))  # fmt: skip
        # The other large-window pools: max with indices (2-D, 3-D), 3-D average and
        # adaptive max, adaptive average (2-D, 3-D).
        clip = x.reshape(2, 3, 4, 4, 4)
        pooled = [ctypes.c_void_p() for _ in range(9)]
        k3, s2, p1, d1 = (I64 * 1)(3), (I64 * 1)(2), (I64 * 1)(1), (I64 * 1)(1)
        k7, p3 = (I64 * 1)(7), (I64 * 1)(3)
        s.call(f"aoti_torch_{dev}_max_pool2d_with_indices", make(x), k7, one, s2, one, p3, one,
               d1, one, I32(1), *[ctypes.byref(h) for h in pooled[:2]])  # fmt: skip
        s.call(f"aoti_torch_{dev}_max_pool3d_with_indices", make(clip), k3, one, s2, one, p1, one,
               d1, one, I32(0), *[ctypes.byref(h) for h in pooled[2:4]])  # fmt: skip
        s.call(f"aoti_torch_{dev}_avg_pool3d", make(clip), k3, one, s2, one, p1, one, I32(0),
               I32(1), None, ctypes.byref(pooled[4]))  # fmt: skip
        s.call(f"aoti_torch_{dev}_adaptive_max_pool3d", make(clip), (I64 * 3)(2, 3, 1), I64(3),
               *[ctypes.byref(h) for h in pooled[5:7]])  # fmt: skip
        s.call(f"aoti_torch_{dev}__adaptive_avg_pool2d", make(x), (I64 * 2)(3, 5), I64(2),
               ctypes.byref(pooled[7]))  # fmt: skip
        s.call(f"aoti_torch_{dev}__adaptive_avg_pool3d", make(clip), (I64 * 3)(3, 2, 3), I64(3),
               ctypes.byref(pooled[8]))  # fmt: skip
        # Order statistics: kthvalue and mode along a dim, the whole tensor's medians.
        ordered = [ctypes.c_void_p() for _ in range(6)]
        s.call(f"aoti_torch_{dev}_kthvalue", make(base), I64(2), I64(1), I32(0),
               *[ctypes.byref(h) for h in ordered[:2]])  # fmt: skip
        s.call(f"aoti_torch_{dev}_mode", make(np.round(base)), I64(0), I32(1),
               *[ctypes.byref(h) for h in ordered[2:4]])  # fmt: skip
        s.call(f"aoti_torch_{dev}_median", make(base), ctypes.byref(ordered[4]))
        s.call(f"aoti_torch_{dev}_nanmedian", make(base), ctypes.byref(ordered[5]))
        pooled += ordered
        # pdist and addbmm.
        summed, rows_apart = ctypes.c_void_p(), ctypes.c_void_p()
        s.call(f"aoti_torch_{dev}__pdist_forward", make(table), F64(2.0), ctypes.byref(rows_apart))
        s.call(f"aoti_torch_{dev}_addbmm", make(base[:, :1].copy()), batch1, batch2, F64(0.5),
               F64(2.0), ctypes.byref(summed))  # fmt: skip
        pooled += [rows_apart, summed]
        # histc and grid_sampler_3d (a grid reaching past the volume: border padding).
        counts, warped = ctypes.c_void_p(), ctypes.c_void_p()
        s.call(f"aoti_torch_{dev}_histc", make(base), I64(4), F64(-1.0), F64(1.0),
               ctypes.byref(counts))  # fmt: skip
        s.call(f"aoti_torch_{dev}_grid_sampler_3d", make(volume), make(grid), I64(0), I64(1),
               I32(0), ctypes.byref(warped))  # fmt: skip
        pooled += [counts, warped]
        # Random draws over int64's range, as a program seeds its random ops: the same after
        # the same seed, on the device and on the CPU.
        s.lib.shimkit_shim_manual_seed(ctypes.c_uint64(3))
        seeds = (
            s.host(np.zeros(16, np.int64), I64_CODE)
            if dev == "cpu"
            else s.empty((16,), None, 0, I64_CODE)
        )
        s.call(f"aoti_torch_{dev}_randint_low_out", seeds, I64(-(2**63)), I64(2**63 - 1),
               (I64 * 1)(16), I64(1))  # fmt: skip
        drawn = s.numpy(seeds, np.int64, I64_CODE)
        r[f"seeds_{dev}_distinct"] = len(set(drawn.tolist()))
        device = I32()
        s.call("aoti_torch_get_device_type", outs[0], ctypes.byref(device))
        r[f"embedding_bag_{dev}_device"] = device.value
        results[dev] = [s.numpy(outs[0]), s.numpy(reduced), s.numpy(scattered), s.numpy(averaged),
                        s.numpy(peaks), s.numpy(peak_at), s.numpy(scored), s.numpy(nonzero),
                        s.numpy(selected), s.numpy(running), s.numpy(running_at),
                        s.numpy(distances), *[s.numpy(h) for h in pooled], drawn,
                        s.numpy(placed), s.numpy(filled)]  # fmt: skip
    r["pooled_shapes"] = [list(a.shape) for a in results["cuda"][3:6]]
    r["host_ops_equal"] = [
        bool(np.array_equal(a, b)) for a, b in zip(results["cpu"], results["cuda"], strict=True)
    ]
    r["embedding_bag_sums"] = bool(
        np.allclose(results["cpu"][0], [table[ids[a:b]].sum(0) for a, b in
                                        zip(offsets, [*offsets[1:], len(ids)], strict=True)])
    )  # fmt: skip
    return r


def reference_conv(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, ...],
    pad: tuple[int, ...], dil: tuple[int, ...], groups: int,
) -> np.ndarray:  # fmt: skip
    """float64 cross-correlation, the definition torch uses, over x's spatial dims."""
    n, oc, cg = x.shape[0], w.shape[0], w.shape[1]
    kernel_sizes = w.shape[2:]
    out_sizes = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, s, p, d in zip(x.shape[2:], kernel_sizes, stride, pad, dil, strict=True)
    ]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), *((p, p) for p in pad)))
    out = np.zeros((n, oc, *out_sizes))
    ocg = oc // groups
    for g in range(groups):
        for offsets in itertools.product(*(range(k) for k in kernel_sizes)):
            window = tuple(
                slice(o * d, o * d + s * (size - 1) + 1, s)
                for o, d, s, size in zip(offsets, dil, stride, out_sizes, strict=True)
            )
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg), *window)]
            kernel = w[(slice(g * ocg, (g + 1) * ocg), slice(None), *offsets)].astype(np.float64)
            out[:, g * ocg : (g + 1) * ocg] += np.einsum("nc...,oc->no...", patch, kernel)
    if b is not None:
        out += b.reshape(1, -1, *[1] * len(out_sizes))
    return out


def reference_conv_transpose(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, ...],
    pad: tuple[int, ...], dil: tuple[int, ...], groups: int, output_padding: tuple[int, ...],
) -> np.ndarray:  # fmt: skip
    """float64 transposed convolution (weight [C_in, C_out / groups, *kernel]): every input
    element adds its weighted kernel window to the output, then the padding is cut off."""
    n, cg, ocg = x.shape[0], w.shape[0] // groups, w.shape[1]
    kernel_sizes = w.shape[2:]
    out_sizes = [
        (size - 1) * s - 2 * p + d * (k - 1) + op + 1
        for size, k, s, p, d, op in zip(
            x.shape[2:], kernel_sizes, stride, pad, dil, output_padding, strict=True
        )
    ]
    full = np.zeros((n, ocg * groups, *(o + 2 * p for o, p in zip(out_sizes, pad, strict=True))))
    for g in range(groups):
        for offsets in itertools.product(*(range(k) for k in kernel_sizes)):
            window = tuple(
                slice(o * d, o * d + s * (size - 1) + 1, s)
                for o, d, s, size in zip(offsets, dil, stride, x.shape[2:], strict=True)
            )
            kernel = w[(slice(g * cg, (g + 1) * cg), slice(None), *offsets)].astype(np.float64)
            part = np.einsum("nc...,co->no...", x[:, g * cg : (g + 1) * cg].astype(np.float64),
                             kernel)  # fmt: skip
            full[(slice(None), slice(g * ocg, (g + 1) * ocg), *window)] += part
    inside = tuple(slice(p, p + o) for p, o in zip(pad, out_sizes, strict=True))
    out = full[(slice(None), slice(None), *inside)]
    if b is not None:
        out = out + b.reshape(1, -1, *[1] * len(out_sizes))
    return out


def channels_last(a: np.ndarray) -> np.ndarray:
    """a's values in channels-last memory order (NHWC, NDHWC), still indexed NCHW (NCDHW)."""
    return np.moveaxis(np.ascontiguousarray(np.moveaxis(a, 1, -1)), -1, 1)


def cudnn_counter(name: str) -> int:
    path = os.environ.get("SHIMKIT_CUDNN", "")
    if not os.path.isfile(path):
        return 0  # cuDNN off or absent
    fake = ctypes.CDLL(path)
    fake.fake_cudnn_counter.restype = ctypes.c_long
    return int(fake.fake_cudnn_counter(name.encode()))


def conv_counts(s: Shims) -> tuple[int, int]:
    on_cudnn, on_host = I64(), I64()
    s.lib.shimkit_cuda_conv_counts(ctypes.byref(on_cudnn), ctypes.byref(on_host))
    return on_cudnn.value, on_host.value


# name: (input [N,C,(D,)(H,)W], weight, bias?, stride, padding, dilation, groups, layout,
#        output_padding: None for a plain convolution, given for a transposed one)
CONV_CASES: dict[str, tuple[Any, ...]] = {
    "nchw_asymmetric": ((2, 3, 9, 7), (4, 3, 3, 2), True, (2, 1), (1, 0), (1, 2), 1, "nchw"),
    "channels_last": ((2, 3, 8, 8), (5, 3, 3, 3), True, (1, 1), (1, 1), (1, 1), 1, "both_cl"),
    "grouped": ((1, 4, 6, 6), (6, 2, 3, 3), False, (1, 1), (0, 0), (1, 1), 2, "nchw"),
    "mixed_layouts": ((2, 3, 7, 7), (4, 3, 3, 3), True, (2, 2), (1, 1), (1, 1), 1, "input_cl"),
    "pointwise": ((2, 6, 5, 5), (4, 6, 1, 1), True, (1, 1), (0, 0), (1, 1), 1, "input_cl"),
    "conv1d": ((2, 3, 10), (5, 3, 3), True, (2,), (1,), (1,), 1, "nchw"),
    # Transposed convolutions (nn.ConvTranspose*): cuDNN's backward data.
    "transposed": ((2, 4, 5, 6), (4, 3, 3, 3), True, (2, 2), (1, 1), (1, 1), 1, "nchw",
                   (1, 0)),
    "transposed_grouped_cl": ((1, 4, 5, 5), (4, 2, 3, 2), False, (2, 1), (0, 1), (1, 2), 2,
                              "both_cl", (1, 0)),
    "transposed_mixed_layouts": ((2, 3, 4, 4), (3, 5, 2, 2), True, (2, 2), (0, 0), (1, 1), 1,
                                 "input_cl", (0, 0)),
    "transposed1d": ((2, 3, 7), (3, 5, 4), True, (3,), (1,), (1,), 1, "nchw", (2,)),
    # The fake cuDNN takes 4-D tensors only: 3-D convolutions show the host path.
    "conv3d": ((2, 3, 4, 5, 6), (4, 3, 3, 2, 3), True, (1, 2, 1), (1, 0, 1), (1, 1, 2), 1,
               "input_cl"),
    # Batch 1, small kernels, one group: ATen's CPU convolution writes this one contiguous
    # (its slow 3-D kernel), cuDNN channels_last_3d.
    "conv3d_batch1": ((1, 3, 4, 5, 6), (4, 3, 3, 2, 3), False, (1, 1, 1), (1, 0, 1), (1, 1, 1), 1,
                      "input_cl"),
    "conv3d_transposed": ((2, 3, 3, 4, 4), (3, 2, 2, 3, 3), True, (2, 1, 2), (0, 1, 1), (1, 1, 1),
                          1, "input_cl", (1, 0, 1)),
}  # fmt: skip


def conv(s: Shims) -> dict[str, Any]:
    """aoti_torch_cuda_convolution against float64 numpy, and its output strides against the
    CPU op's (ATen's memory-format rule), case by case; with which path ran."""
    rng = np.random.default_rng(7)
    s.lib.shimkit_cuda_cudnn_info.restype = ctypes.c_char_p
    s.lib.shimkit_cuda_conv_last_fallback.restype = ctypes.c_char_p
    r: dict[str, Any] = {"cudnn_info": s.lib.shimkit_cuda_cudnn_info().decode()}
    for name, (xs, ws, with_bias, st, pd, dl, groups, layout, *rest) in CONV_CASES.items():
        output_padding = rest[0] if rest else None
        x = rng.standard_normal(xs, dtype=np.float32)
        w = rng.standard_normal(ws, dtype=np.float32)
        out_channels = ws[0] if output_padding is None else ws[1] * groups
        b = rng.standard_normal(out_channels, dtype=np.float32) if with_bias else None
        if layout in ("both_cl", "input_cl"):
            x = channels_last(x)
        if layout == "both_cl":
            w = channels_last(w)
        spatial = len(st)
        args = [(I64 * spatial)(*v) for v in (st, pd, dl)]
        outpad = (I64 * spatial)(*(output_padding or [0] * spatial))
        transposed = I32(output_padding is not None)
        results = {}
        watched = ("forward", "backward_data", "executes", "transform", "tf32_runs")
        before = (conv_counts(s), [cudnn_counter(c) for c in watched])
        for dev, make in (("cuda", s.device), ("cpu", s.host)):
            y = ctypes.c_void_p()
            bias_handle = make(b) if b is not None else None
            bias = ctypes.byref(bias_handle) if bias_handle is not None else None
            s.call(f"aoti_torch_{dev}_convolution", make(x), make(w), bias,
                   args[0], I64(spatial), args[1], I64(spatial), args[2], I64(spatial),
                   transposed, outpad, I64(spatial), I64(groups), ctypes.byref(y))  # fmt: skip
            results[dev] = (s.meta(y)[1], s.numpy(y))
            if dev == "cuda":
                after = (conv_counts(s), [cudnn_counter(c) for c in watched])
        ref = (
            reference_conv(x, w, b, st, pd, dl, groups)
            if output_padding is None
            else reference_conv_transpose(x, w, b, st, pd, dl, groups, output_padding)
        )
        r[name] = {
            "transposed": output_padding is not None,
            "max_abs_diff": float(np.abs(results["cuda"][1] - ref).max()),
            "strides": results["cuda"][0],
            "strides_match_cpu": results["cuda"][0] == results["cpu"][0],
            "on_cudnn": after[0][0] - before[0][0],
            "on_host": after[0][1] - before[0][1],
            **{f"cudnn_{c}": a - b for c, a, b in zip(watched, after[1], before[1], strict=True)},
            "fallback_reason": (s.lib.shimkit_cuda_conv_last_fallback() or b"").decode(),
        }
    return r


def conv_calls(s: Shims) -> dict[str, Any]:
    """What one eager convolution costs in library calls, once its plan exists: the same
    channels_last conv with bias run six times (warm-up, then five counted), and as the
    control five convs of five new geometries (each must build its own plan)."""
    rng = np.random.default_rng(5)
    cuda_calls = ("malloc", "sync", "copy", "host_fns", "live_events")
    cudnn_calls = ("heuristics", "exec_plans", "variant_packs", "executes", "forward",
                   "add", "set_stream", "transform", "slow_runs")  # fmt: skip
    args = [(I64 * 2)(*v) for v in ((1, 1), (1, 1), (1, 1), (0, 0))]

    def conv_once(x: Any, w: Any, b: Any) -> None:
        y = ctypes.c_void_p()
        s.call("aoti_torch_cuda_convolution", x, w, ctypes.byref(b), args[0], I64(2),
               args[1], I64(2), args[2], I64(2), I32(0), args[3], I64(2), I64(1),
               ctypes.byref(y))  # fmt: skip
        s.call("aoti_torch_delete_tensor_object", y)  # the blob frees it: the block is reused

    def counts() -> dict[str, int]:
        plans = I64()
        s.lib.shimkit_cuda_conv_api_counts(None, ctypes.byref(plans))
        return {"plans_built": plans.value, **{c: counter(c) for c in cuda_calls},
                **{f"cudnn_{c}": cudnn_counter(c) for c in cudnn_calls}}  # fmt: skip

    def delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {k: b[k] - a[k] for k in a}

    w = s.device(channels_last(rng.standard_normal((8, 4, 3, 3), dtype=np.float32)))
    b = s.device(rng.standard_normal(8, dtype=np.float32))
    x = s.device(channels_last(rng.standard_normal((2, 4, 6, 6), dtype=np.float32)))
    start = counts()
    conv_once(x, w, b)
    warm = counts()
    for _ in range(5):
        conv_once(x, w, b)
    r: dict[str, Any] = {"first": delta(start, warm), "five_more": delta(warm, counts())}
    inputs = [s.device(channels_last(rng.standard_normal((2, 4, 7 + i, 6), dtype=np.float32)))
              for i in range(5)]  # fmt: skip
    before = counts()
    for xi in inputs:
        conv_once(xi, w, b)
    r["five_new_geometries"] = delta(before, counts())
    return r


def captured_device_work(s: Shims) -> dict[str, Any]:
    """cuBLASLt and cuDNN under a capture, as the runner drives them (one eager run first,
    which plans and times, then the capture): a GEMM with a bias epilogue (addmm), a batched
    GEMM (bmm), a convolution with bias and a transposed one are recorded into the graph,
    and each launch computes them from the inputs as they are at that launch. Per launch:
    the largest difference from float64 numpy over the four results."""
    lib = s.lib
    rng = np.random.default_rng(12)
    stream, guard = open_guarded_stream(s)
    shapes = {"x": (5, 7), "w": (7, 3), "bias": (3,), "a": (4, 5, 6), "b": (4, 6, 2),
              "image": (2, 3, 6, 6), "kernel": (4, 3, 3, 3), "conv_bias": (4,),
              "up_kernel": (3, 2, 3, 3)}  # fmt: skip
    dev = {name: s.empty(shape, None, 0) for name, shape in shapes.items()}
    linear, batched = s.empty((5, 3), None, 0), s.empty((4, 5, 2), None, 0)
    one, two = (I64 * 2)(1, 1), (I64 * 2)(2, 2)

    def new_inputs() -> dict[str, np.ndarray]:
        v = {n: rng.standard_normal(shape, dtype=np.float32) for n, shape in shapes.items()}
        for name, h in dev.items():
            s.call("aoti_torch_copy_", h, s.host(v[name]), I32(0))
        return v

    def run() -> tuple[Any, Any]:
        s.call("aoti_torch_cuda_addmm_out", linear, dev["bias"], dev["x"], dev["w"],
               F64(1.0), F64(1.0))  # fmt: skip
        s.call("aoti_torch_cuda_bmm_out", batched, dev["a"], dev["b"])
        conv, up = ctypes.c_void_p(), ctypes.c_void_p()
        bias = ctypes.byref(dev["conv_bias"])
        s.call("aoti_torch_cuda_convolution", dev["image"], dev["kernel"], bias, one, I64(2),
               one, I64(2), one, I64(2), I32(0), None, I64(0), I64(1),
               ctypes.byref(conv))  # fmt: skip
        s.call("aoti_torch_cuda_convolution", dev["image"], dev["up_kernel"], None, two, I64(2),
               one, I64(2), one, I64(2), I32(1), one, I64(2), I64(1),
               ctypes.byref(up))  # fmt: skip
        return conv, up

    def worst(v: dict[str, np.ndarray], conv: Any, up: Any) -> float:
        wants = [
            (linear, v["x"] @ v["w"] + v["bias"]),
            (batched, v["a"] @ v["b"]),
            (conv, reference_conv(v["image"], v["kernel"], v["conv_bias"], (1, 1), (1, 1),
                                  (1, 1), 1)),
            (up, reference_conv_transpose(v["image"], v["up_kernel"], None, (2, 2), (1, 1),
                                          (1, 1), 1, (1, 1))),
        ]  # fmt: skip
        return max(float(np.abs(s.numpy(h) - want).max()) for h, want in wants)

    r: dict[str, Any] = {}
    v = new_inputs()
    r["eager"] = worst(v, *run())  # plans (and times) everything once, as the runner's warm-up
    matmuls = lt_counter("matmul")
    pool = ctypes.c_uint64()
    assert lib.shimkit_cuda_graph_begin(stream, ctypes.byref(pool)) == 0, s.error()
    conv, up = run()
    exec_ = ctypes.c_void_p()
    assert lib.shimkit_cuda_graph_end(stream, ctypes.byref(exec_)) == 0, s.error()
    r["captured_matmuls"] = lt_counter("matmul") - matmuls
    r["launches"] = []
    for _ in range(3):
        v = new_inputs()
        assert lib.shimkit_cuda_graph_launch(exec_, pool, stream) == 0, s.error()
        assert lib.shimkit_cuda_stream_synchronize(stream) == 0, s.error()
        r["launches"].append(worst(v, conv, up))
    assert lib.shimkit_cuda_graph_free(exec_, pool, stream) == 0, s.error()
    close_guarded_stream(s, stream, guard)
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
    "matmul_half": matmul_half,
    "blas_binding": blas_binding,
    "autotune": autotune,
    "graph_pools": graph_pools,
    "captured_host_steps": captured_host_steps,
    "captured_random_draws": captured_random_draws,
    "captured_device_work": captured_device_work,
    "fallbacks": fallbacks,
    "conv": conv,
    "conv_calls": conv_calls,
}

if __name__ == "__main__":
    shims = Shims(sys.argv[1])
    print(json.dumps(SCENARIOS[sys.argv[2]](shims)))
