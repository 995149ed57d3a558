"""ctypes binding of the CUDA runner (runtime/cuda/shimkit_cuda_runtime.h).

numpy in, numpy out; no torch. Used by the GPU experiment, bench/bench_cuda.py
and tests/cuda.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
from shimkit.runtime.capi import DTYPE_CODES, MAX_DIMS

# numpy dtype <-> torch ScalarType number: the CPU runtime's table (one home).
DTYPES: dict[Any, int] = {np.dtype(name): code for name, code in DTYPE_CODES.items()}
NUMPY_OF = {code: dtype for dtype, code in DTYPES.items()}
STATUS = {
    1: "SHIMKIT_E_BAD_BLOB",
    2: "SHIMKIT_E_MISSING_SHIM",
    3: "SHIMKIT_E_MISSING_ENTRY",
    4: "SHIMKIT_E_DLOPEN",
    5: "SHIMKIT_E_CREATE",
    6: "SHIMKIT_E_BAD_INPUT",
    7: "SHIMKIT_E_RUN",
    8: "SHIMKIT_E_IO",
    9: "SHIMKIT_E_PROVIDER",
    10: "SHIMKIT_E_DEVICE",
}


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sizes", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
    ]


class SlimCudaError(RuntimeError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{STATUS.get(code, code)}: {message}")
        self.code = code
        self.status = STATUS.get(code, str(code))


def describe(array: np.ndarray) -> Tensor:
    if array.dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {array.dtype}")
    t = Tensor()
    t.data = array.ctypes.data
    t.ndim = array.ndim
    t.dtype = DTYPES[array.dtype]
    for i, (size, stride) in enumerate(zip(array.shape, array.strides, strict=True)):
        t.sizes[i] = size
        t.strides[i] = stride // array.itemsize
    return t


class Runtime:
    """The runner library (it pulls in the CUDA shim library it links to)."""

    def __init__(self, runner_so: str | os.PathLike[str]) -> None:
        self.path = Path(runner_so)
        # The shims must be global (blobs bind to them); the runner needs them first.
        self.shims = ctypes.CDLL(
            str(self.path.with_name("libshimkit_cuda_shims.so")), mode=os.RTLD_GLOBAL
        )
        self.lib = ctypes.CDLL(str(self.path), mode=os.RTLD_GLOBAL)
        lib = self.lib
        lib.shimkit_cuda_last_error.restype = ctypes.c_char_p
        lib.shimkit_cuda_model_load.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_void_p),
        ]
        lib.shimkit_cuda_model_free.argtypes = [ctypes.c_void_p]
        lib.shimkit_cuda_model_num_inputs.argtypes = [ctypes.c_void_p]
        lib.shimkit_cuda_model_num_inputs.restype = ctypes.c_size_t
        lib.shimkit_cuda_model_num_outputs.argtypes = [ctypes.c_void_p]
        lib.shimkit_cuda_model_num_outputs.restype = ctypes.c_size_t
        lib.shimkit_cuda_model_load_base.argtypes = [ctypes.c_void_p]
        lib.shimkit_cuda_model_load_base.restype = ctypes.c_size_t
        lib.shimkit_cuda_model_run.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
        ]
        lib.shimkit_cuda_model_bench.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_double),
        ]
        lib.shimkit_cuda_model_use_graphs.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.shimkit_cuda_model_graph_status.argtypes = [ctypes.c_void_p]
        lib.shimkit_cuda_model_graph_status.restype = ctypes.c_char_p
        lib.shimkit_cuda_h2d_bandwidth.argtypes = [
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int32,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_double),
        ]
        self.shims.shimkit_cuda_device_count.restype = ctypes.c_int32
        self.shims.shimkit_cuda_unavailable_reason.restype = ctypes.c_char_p
        self.shims.shimkit_cuda_cached_bytes.restype = ctypes.c_size_t
        self.shims.shimkit_cuda_cudnn_info.restype = ctypes.c_char_p
        self.shims.shimkit_cuda_conv_last_fallback.restype = ctypes.c_char_p

    def check(self, rc: int) -> None:
        if rc != 0:
            raise SlimCudaError(rc, self.lib.shimkit_cuda_last_error().decode(errors="replace"))

    def device_count(self) -> int:
        return int(self.shims.shimkit_cuda_device_count())

    def unavailable_reason(self) -> str:
        return self.shims.shimkit_cuda_unavailable_reason().decode(errors="replace")

    def cached_bytes(self) -> int:
        return int(self.shims.shimkit_cuda_cached_bytes())

    def cudnn_info(self) -> str:
        return self.shims.shimkit_cuda_cudnn_info().decode(errors="replace")

    def conv_counts(self) -> tuple[int, int]:
        """(convolutions run on cuDNN, on the host) so far in this process."""
        on_cudnn, on_host = ctypes.c_int64(), ctypes.c_int64()
        self.shims.shimkit_cuda_conv_counts(ctypes.byref(on_cudnn), ctypes.byref(on_host))
        return on_cudnn.value, on_host.value

    def gemm_counts(self) -> tuple[int, int]:
        """(float32 GEMMs run on cuBLASLt, on legacy cuBLAS) so far in this process."""
        on_lt, on_cublas = ctypes.c_int64(), ctypes.c_int64()
        self.shims.shimkit_cuda_gemm_counts(ctypes.byref(on_lt), ctypes.byref(on_cublas))
        return on_lt.value, on_cublas.value

    def last_conv_fallback(self) -> str:
        return (self.shims.shimkit_cuda_conv_last_fallback() or b"").decode(errors="replace")

    def load(self, blob: bytes, device: int = 0) -> Model:
        handle = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(blob, len(blob))
        self.check(self.lib.shimkit_cuda_model_load(buf, len(blob), device, ctypes.byref(handle)))
        return Model(self, handle)

    def h2d_bandwidth(
        self, nbytes: int, pinned: bool, device: int = 0, iterations: int = 5
    ) -> float:
        rate = ctypes.c_double()
        self.check(
            self.lib.shimkit_cuda_h2d_bandwidth(
                nbytes, int(pinned), device, iterations, ctypes.byref(rate)
            )
        )
        return rate.value


class Model:
    def __init__(self, runtime: Runtime, handle: ctypes.c_void_p) -> None:
        self.runtime = runtime
        self.handle = handle
        self.num_inputs = int(runtime.lib.shimkit_cuda_model_num_inputs(handle))
        self.num_outputs = int(runtime.lib.shimkit_cuda_model_num_outputs(handle))

    @property
    def load_base(self) -> int:
        return int(self.runtime.lib.shimkit_cuda_model_load_base(self.handle))

    def _inputs(self, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], Any]:
        kept = [np.ascontiguousarray(a) for a in arrays]
        descs = (Tensor * max(len(kept), 1))(*[describe(a) for a in kept])
        return kept, descs

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        kept, descs = self._inputs(arrays)
        outs = (Tensor * max(self.num_outputs, 1))()
        self.runtime.check(
            self.runtime.lib.shimkit_cuda_model_run(
                self.handle, descs, len(kept), outs, self.num_outputs
            )
        )
        results = []
        for i in range(self.num_outputs):
            t = outs[i]
            dtype = NUMPY_OF[t.dtype]
            shape = tuple(t.sizes[d] for d in range(t.ndim))
            count = int(np.prod(shape)) if shape else 1
            buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(t.data)
            results.append(np.frombuffer(bytes(buf), dtype=dtype).reshape(shape))
        return results

    def bench(self, arrays: list[np.ndarray], iterations: int) -> float:
        """Mean ns per run with device-resident inputs, synchronised after each run."""
        kept, descs = self._inputs(arrays)
        ns = ctypes.c_double()
        self.runtime.check(
            self.runtime.lib.shimkit_cuda_model_bench(
                self.handle, descs, len(kept), iterations, ctypes.byref(ns)
            )
        )
        return ns.value

    def use_graphs(self, enable: bool) -> None:
        """CUDA-graph replay on or off (shimkit_cuda_model_use_graphs)."""
        self.runtime.check(self.runtime.lib.shimkit_cuda_model_use_graphs(self.handle, int(enable)))

    def graph_status(self) -> str:
        status: bytes = self.runtime.lib.shimkit_cuda_model_graph_status(self.handle)
        return status.decode(errors="replace")

    def free(self) -> None:
        if self.handle:
            self.runtime.lib.shimkit_cuda_model_free(self.handle)
            self.handle = ctypes.c_void_p()
