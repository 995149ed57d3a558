"""Run prefixed AOTInductor CUDA blobs on shimkit's slim CUDA shims, from Python.

    model = shimkit.runtime.load("model.pt2", device="cuda")               # eager
    model = shimkit.runtime.load("model.pt2", device="cuda:1", graphs=True) # CUDA-graph replay
    outputs = model(x)  # numpy arrays or CPU tensors in: numpy arrays out
    outputs = model(x_cuda)  # torch CUDA tensors in: torch CUDA tensors out, no host copy

The libraries (runtime/cuda/shimkit_cuda_runtime.h over shims/cuda) come from
$SHIMKIT_LIB_DIR or a cached build from the checkout; they open the CUDA
runtime, cuBLAS(Lt) and cuDNN at run time, so they load anywhere, and without
a usable GPU every load fails with one line saying why. A process holds one
slim shim provider: the CPU runtime (`device="cpu"`) or this one, not both.

Inputs in GPU memory (torch CUDA tensors, `__cuda_array_interface__` objects) are read in
place and the outputs stay on the GPU (shimkit.runtime.device_memory); host inputs are
copied in and the outputs copied back.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError
from shimkit.runtime.admit import refuse_unless_clean
from shimkit.runtime.blob import (
    BlobSource,
    InputSpec,
    LoadedBlob,
    as_array,
    check_input_spec,
    dense_in_order,
)
from shimkit.runtime.build import RuntimeLibs, find_cuda_libraries
from shimkit.runtime.capi import (
    CODE_DTYPES,
    DTYPE_CODES,
    Tensor,
    claim_provider,
    descriptor,
    dtype_code,
    numpy_dtype,
)
from shimkit.runtime.device_memory import (
    LEGACY_STREAMS,
    DeviceArray,
    DeviceTensor,
    device_inputs,
    is_torch_tensor,
    on_device,
    torch_tensor,
)

# runtime/shimkit_runtime.h's status codes, plus SHIMKIT_E_DEVICE.
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


class CudaRuntimeError(ShimkitError):
    """A failure the CUDA runner reported; `status` is its SHIMKIT_E_* name."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = STATUS.get(code, str(code))


def parse_device(device: str) -> int | None:
    """None for "cpu", the CUDA device index for "cuda" / "cuda:N"; ShimkitError otherwise."""
    if device == "cpu":
        return None
    if device == "cuda":
        return 0
    head, _, index = device.partition(":")
    if head == "cuda" and index.isdigit():
        return int(index)
    raise ShimkitError(f"device {device!r}: use 'cpu', 'cuda' or 'cuda:N'")


class CudaRuntime:
    """The CUDA runner library (it pulls in the slim CUDA shims) with typed entry points."""

    def __init__(self, libs: RuntimeLibs) -> None:
        claim_provider("cuda", libs.runtime)
        try:
            self.lib = ctypes.CDLL(str(libs.runtime), mode=os.RTLD_GLOBAL)
        except OSError as exc:
            raise ShimkitError(f"{libs.runtime}: cannot load the CUDA runtime: {exc}") from None
        try:
            self._declare()
        except AttributeError as exc:
            raise ShimkitError(
                f"{libs.runtime}: not a shimkit CUDA runtime library: {exc}"
            ) from None
        provider = self.lib.shimkit_cuda_provider_path()
        self.paths = RuntimeLibs(Path(provider.decode()) if provider else libs.shims, libs.runtime)

    def _declare(self) -> None:
        lib = self.lib
        p, sz, i, i32, i64 = (
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int32, ctypes.c_int64,
        )  # fmt: skip
        tensors = ctypes.POINTER(Tensor)
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "shimkit_cuda_last_error": (ctypes.c_char_p, []),
            "shimkit_cuda_provider_path": (ctypes.c_char_p, []),
            "shimkit_cuda_model_load": (i, [p, sz, i32, ctypes.POINTER(p)]),
            "shimkit_cuda_model_free": (None, [p]),
            "shimkit_cuda_model_num_inputs": (sz, [p]),
            "shimkit_cuda_model_num_outputs": (sz, [p]),
            "shimkit_cuda_model_load_base": (sz, [p]),
            "shimkit_cuda_model_run": (i, [p, tensors, sz, tensors, sz]),
            "shimkit_cuda_model_run_device": (i, [p, tensors, sz, tensors, ctypes.POINTER(p), sz]),
            "shimkit_cuda_tensor_free": (None, [p]),
            "shimkit_cuda_tensor_dlpack": (i, [p, ctypes.POINTER(p)]),
            "shimkit_cuda_model_bench": (i, [p, tensors, sz, i64, ctypes.POINTER(ctypes.c_double)]),
            "shimkit_cuda_model_use_graphs": (i, [p, i]),
            "shimkit_cuda_model_graph_status": (ctypes.c_char_p, [p]),
            "shimkit_cuda_h2d_bandwidth": (i, [sz, i, i32, i, ctypes.POINTER(ctypes.c_double)]),
            # The shim library's diagnostics (global: the runner's NEEDED entry).
            "shimkit_cuda_device_count": (i32, []),
            "shimkit_cuda_stream_synchronize": (i, [p]),
            "shimkit_cuda_unavailable_reason": (ctypes.c_char_p, []),
            "shimkit_cuda_cached_bytes": (sz, []),
            "shimkit_cuda_cudnn_info": (ctypes.c_char_p, []),
            "shimkit_cuda_conv_last_fallback": (ctypes.c_char_p, []),
            "shimkit_cuda_conv_counts": (None, [ctypes.POINTER(i64)] * 2),
            "shimkit_cuda_conv_api_counts": (None, [ctypes.POINTER(i64)] * 2),
            "shimkit_cuda_gemm_counts": (None, [ctypes.POINTER(i64)] * 2),
            "shimkit_cuda_cudnn_tf32": (i32, []),
            "shimkit_cuda_set_cudnn_tf32": (None, [i32]),
            "shimkit_cuda_matmul_tf32": (i32, []),
            "shimkit_cuda_set_matmul_tf32": (None, [i32]),
            "shimkit_shim_manual_seed": (None, [ctypes.c_uint64]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes

    def check(self, rc: int, where: str = "") -> None:
        if rc != 0:
            message = (self.lib.shimkit_cuda_last_error() or b"").decode(errors="replace")
            raise CudaRuntimeError(rc, f"{where}: {message}" if where else message)

    @property
    def provider(self) -> Path:
        return self.paths.shims

    def device_count(self) -> int:
        """GPUs the CUDA runtime sees; -1 when CUDA is unusable (see unavailable_reason)."""
        return int(self.lib.shimkit_cuda_device_count())

    def unavailable_reason(self) -> str:
        return (self.lib.shimkit_cuda_unavailable_reason() or b"").decode(errors="replace")

    def cached_bytes(self) -> int:
        return int(self.lib.shimkit_cuda_cached_bytes())

    # OutputMemory (shimkit.runtime.device_memory): what a DeviceTensor frees and exports.
    def free_output(self, owner: int) -> None:
        self.lib.shimkit_cuda_tensor_free(owner)

    def export_dlpack(self, owner: int) -> int:
        managed = ctypes.c_void_p()
        self.check(self.lib.shimkit_cuda_tensor_dlpack(owner, ctypes.byref(managed)), "dlpack")
        return int(managed.value or 0)

    def cudnn_info(self) -> str:
        return (self.lib.shimkit_cuda_cudnn_info() or b"").decode(errors="replace")

    def _pair(self, name: str) -> tuple[int, int]:
        a, b = ctypes.c_int64(), ctypes.c_int64()
        getattr(self.lib, name)(ctypes.byref(a), ctypes.byref(b))
        return a.value, b.value

    def conv_counts(self) -> tuple[int, int]:
        """(convolutions run on cuDNN, on the host) so far in this process."""
        return self._pair("shimkit_cuda_conv_counts")

    def conv_api_counts(self) -> tuple[int, int]:
        """(convolutions run through cuDNN's graph API, cuDNN plans built) so far."""
        return self._pair("shimkit_cuda_conv_api_counts")

    def gemm_counts(self) -> tuple[int, int]:
        """(float32 GEMMs run on cuBLASLt, on legacy cuBLAS) so far in this process."""
        return self._pair("shimkit_cuda_gemm_counts")

    def last_conv_fallback(self) -> str:
        return (self.lib.shimkit_cuda_conv_last_fallback() or b"").decode(errors="replace")

    @property
    def cudnn_tf32(self) -> bool:
        """Whether float32 convolutions may use TF32 (torch's default; shimkit's is off)."""
        return bool(self.lib.shimkit_cuda_cudnn_tf32())

    @cudnn_tf32.setter
    def cudnn_tf32(self, allowed: bool) -> None:
        self.lib.shimkit_cuda_set_cudnn_tf32(int(allowed))

    @property
    def matmul_tf32(self) -> bool:
        """Whether float32 matmuls (mm, addmm, bmm) may use TF32 (off in torch and shimkit)."""
        return bool(self.lib.shimkit_cuda_matmul_tf32())

    @matmul_tf32.setter
    def matmul_tf32(self, allowed: bool) -> None:
        self.lib.shimkit_cuda_set_matmul_tf32(int(allowed))

    def manual_seed(self, seed: int) -> None:
        """Seeds the generator of the blobs' random ops (their seeds are drawn on the host)."""
        self.lib.shimkit_shim_manual_seed(seed)

    @property
    def math(self) -> str:
        """The float32 math runs now use: "float32", or where TF32 is allowed."""
        tf32 = [n for n, on in (("convolutions", self.cudnn_tf32), ("matmuls", self.matmul_tf32))
                if on]  # fmt: skip
        return "TF32 " + " and ".join(tf32) if tf32 else "float32"

    def h2d_bandwidth(
        self, nbytes: int, pinned: bool, device: int = 0, iterations: int = 5
    ) -> float:
        """Host-to-device GB/s through the shims (pinned or pageable source), best of N."""
        rate = ctypes.c_double()
        self.check(
            self.lib.shimkit_cuda_h2d_bandwidth(
                nbytes, int(pinned), device, iterations, ctypes.byref(rate)
            )
        )
        return rate.value


_LOCK = threading.Lock()
_RUNTIMES: dict[Path, CudaRuntime] = {}


def cuda_runtime(libs: RuntimeLibs | None = None) -> CudaRuntime:
    """The process-wide CUDA runtime (from `libs`, else $SHIMKIT_LIB_DIR or a local build)."""
    libs = libs or find_cuda_libraries()
    key = Path(os.path.realpath(libs.runtime))
    with _LOCK:
        if key not in _RUNTIMES:
            _RUNTIMES[key] = CudaRuntime(libs)
        return _RUNTIMES[key]


def cuda_shim_library() -> Path:
    """The slim CUDA shim library: what a blob compiled for the CUDA runtime may import
    (`shimkit.runtime.capi.shim_library` for the CPU)."""
    libs = find_cuda_libraries()
    if libs.shims.is_file():
        return libs.shims
    return cuda_runtime(libs).provider  # $SHIMKIT_LIB_DIR: the runtime knows


def _host_array(value: Any, index: int) -> np.ndarray:
    """A C-contiguous host array of a numpy array or a torch tensor on any device."""
    array = as_array(value, index, any_device=True)
    dtype_code(array.dtype.name, array.ndim, index)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


def _describe(array: np.ndarray) -> Tensor:
    strides = tuple(stride // array.itemsize for stride in array.strides)
    return descriptor(array.ctypes.data, array.shape, strides, DTYPE_CODES[array.dtype.name])


class CudaModel(LoadedBlob):
    """A blob loaded on a GPU. `close()` (or GC) unloads it; `graphs` turns on CUDA-graph
    replay (first run eager, second captured, later runs one graph launch)."""

    def __init__(
        self,
        source: BlobSource,
        device_index: int = 0,
        *,
        graphs: bool = False,
        lint: bool = True,
        runtime: CudaRuntime | None = None,
        config: ShimConfig | None = None,
    ) -> None:
        self.source = source
        self.device_index = device_index
        self._handle: ctypes.c_void_p | None = None
        self._lock = threading.Lock()
        self._rt = runtime or cuda_runtime()
        if lint:
            # The CUDA libraries serve the checkout's prefix file (build_cuda).
            config = config or load_config()
            refuse_unless_clean(source.data, self._where(), config, self._rt.provider, "cuda")
        handle = ctypes.c_void_p()
        data = source.data
        self._rt.check(
            self._rt.lib.shimkit_cuda_model_load(
                data, len(data), device_index, ctypes.byref(handle)
            ),
            self._where(),
        )
        self._handle = handle
        self.source = source.without_bytes()
        self.num_inputs = int(self._rt.lib.shimkit_cuda_model_num_inputs(handle))
        self.num_outputs = int(self._rt.lib.shimkit_cuda_model_num_outputs(handle))
        specs = source.inputs
        self.input_specs: tuple[InputSpec, ...] | None = (
            specs if specs is not None and len(specs) == self.num_inputs else None
        )
        if graphs:
            self.use_graphs(True)

    @property
    def device(self) -> str:
        return f"cuda:{self.device_index}"

    @property
    def load_base(self) -> int:
        """Where the blob is mapped (for reading its resolved GOT entries)."""
        return int(self._rt.lib.shimkit_cuda_model_load_base(self._open_handle()))

    def _open_handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise ShimkitError(f"{self._where()}: model is closed")
        return self._handle

    def _inputs(self, inputs: Sequence[Any]) -> tuple[list[np.ndarray], Any]:
        """Host arrays and their descriptors; an error names the file and the input."""
        if len(inputs) != self.num_inputs:
            raise ShimkitError(
                f"{self._where()}: model takes {self.num_inputs} inputs, got {len(inputs)}"
            )
        try:
            arrays = [_host_array(value, i) for i, value in enumerate(inputs)]
            if self.input_specs is not None:
                for i, (array, spec) in enumerate(zip(arrays, self.input_specs, strict=True)):
                    check_input_spec(array.dtype.name, array.shape, spec, i)
                    if spec.order is not None:  # compiled for a channels-last input
                        arrays[i] = dense_in_order(array, spec.order)
        except ShimkitError as exc:
            raise ShimkitError(f"{self._where()}: {exc}") from None
        descs = (Tensor * max(len(arrays), 1))(*[_describe(a) for a in arrays])
        return arrays, descs

    def _device_inputs(self, inputs: Sequence[Any]) -> list[DeviceArray]:
        """Where each input lies on the model's GPU; an error names the file and the input."""
        if len(inputs) != self.num_inputs:
            raise ShimkitError(
                f"{self._where()}: model takes {self.num_inputs} inputs, got {len(inputs)}"
            )
        try:
            return device_inputs(inputs, self.input_specs, self.device_index)
        except ShimkitError as exc:
            raise ShimkitError(f"{self._where()}: {exc}") from None

    def run_device(self, *inputs: Any) -> list[DeviceTensor]:
        """Runs on inputs in GPU memory (torch CUDA tensors or `__cuda_array_interface__`
        objects), read in place; returns the outputs in GPU memory, computed."""
        arrays = self._device_inputs(inputs)
        lib = self._rt.lib
        # Work a producer queued on a stream of its own must be done before the run reads
        # its output; the legacy default stream's is ordered before the run already.
        for stream in {a.stream for a in arrays} - {None, *LEGACY_STREAMS}:
            self._rt.check(lib.shimkit_cuda_stream_synchronize(stream), self._where())
        descs = (Tensor * max(len(arrays), 1))(*[a.descriptor() for a in arrays])
        outs = (Tensor * max(self.num_outputs, 1))()
        owners = (ctypes.c_void_p * max(self.num_outputs, 1))()
        with self._lock:
            self._rt.check(
                lib.shimkit_cuda_model_run_device(
                    self._open_handle(), descs, len(arrays), outs, owners, self.num_outputs
                ),
                self._where(),
            )
        results = []
        try:
            for i in range(self.num_outputs):
                results.append(DeviceTensor(outs[i], owners[i], self.device_index, self._rt))
                owners[i] = None
        finally:
            for owner in owners[: self.num_outputs]:
                self._rt.free_output(owner)  # those not handed out (NULL: nothing)
        return results

    def __call__(self, *inputs: Any) -> list[Any]:
        """Runs the model. Host inputs (numpy arrays, CPU tensors) are copied to the GPU
        and the outputs come back as numpy arrays; inputs in GPU memory are read in place
        and the outputs stay there: torch CUDA tensors when the inputs are torch tensors,
        else DeviceTensors (run_device)."""
        if any(on_device(value) for value in inputs):
            outputs = self.run_device(*inputs)
            if any(is_torch_tensor(value) for value in inputs):
                return [torch_tensor(out) for out in outputs]
            return outputs
        with self._lock:
            handle = self._open_handle()
            keep_alive, descs = self._inputs(inputs)
            outs = (Tensor * max(self.num_outputs, 1))()
            self._rt.check(
                self._rt.lib.shimkit_cuda_model_run(
                    handle, descs, len(keep_alive), outs, self.num_outputs
                ),
                self._where(),
            )
            results = []
            for i in range(self.num_outputs):
                desc = outs[i]
                name = CODE_DTYPES.get(desc.dtype)
                if name is None:
                    raise ShimkitError(
                        f"output {i}: dtype code {desc.dtype} has no numpy equivalent"
                    )
                shape = tuple(desc.sizes[d] for d in range(desc.ndim))
                dtype = numpy_dtype(name)
                count = int(np.prod(shape)) if shape else 1
                buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(desc.data)
                results.append(
                    np.frombuffer(bytes(buffer), dtype=dtype, count=count).reshape(shape)
                )
            return results

    def bench(self, *inputs: Any, iterations: int = 100) -> float:
        """Mean ns per run with device-resident inputs, synchronised after every run."""
        with self._lock:
            handle = self._open_handle()
            keep_alive, descs = self._inputs(inputs)
            ns = ctypes.c_double()
            self._rt.check(
                self._rt.lib.shimkit_cuda_model_bench(
                    handle, descs, len(keep_alive), iterations, ctypes.byref(ns)
                ),
                self._where(),
            )
            return float(ns.value)

    def use_graphs(self, enable: bool) -> None:
        """CUDA-graph replay on or off (shimkit_cuda_model_use_graphs)."""
        with self._lock:
            self._rt.check(
                self._rt.lib.shimkit_cuda_model_use_graphs(self._open_handle(), int(enable)),
                self._where(),
            )

    @property
    def graph_status(self) -> str:
        """ "off", "cold", "warmed up", "replaying" ("replaying, N host steps (topk, histc)"
        when host fallbacks run in the graph, naming their ops: each replay then waits for the
        host), or
        "eager: <why replay was given up>"."""
        raw = self._rt.lib.shimkit_cuda_model_graph_status(self._open_handle())
        return (raw or b"").decode(errors="replace")

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._rt.lib.shimkit_cuda_model_free(self._handle)
                self._handle = None
