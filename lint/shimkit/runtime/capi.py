"""ctypes declarations for runtime/shimkit_runtime.h."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError
from shimkit.runtime.build import RuntimeLibs, find_libraries

MAX_DIMS = 8

# numpy dtype name <-> torch ScalarType number (the shims' dtype encoding). numpy has no
# bfloat16: that name is ml_dtypes' type (see numpy_dtype).
DTYPE_CODES: dict[str, int] = {
    "uint8": 0,
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "float16": 5,
    "float32": 6,
    "float64": 7,
    "bool": 11,
    "bfloat16": 15,
    "uint16": 27,
    "uint32": 28,
    "uint64": 29,
}
CODE_DTYPES: dict[int, str] = {code: name for name, code in DTYPE_CODES.items()}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a DTYPE_CODES name. bfloat16 is the ml_dtypes package's type (the
    one JAX and ONNX use), which numpy knows by that name once ml_dtypes is imported: it is
    imported here, when a bfloat16 array is first needed, so that models of other types
    do not need the package."""
    if name == "bfloat16":
        try:
            import ml_dtypes  # noqa: F401  (registers the type with numpy)
        except ImportError:
            raise ShimkitError(
                "bfloat16 tensors need the ml_dtypes package (numpy has no bfloat16): "
                "pip install ml_dtypes"
            ) from None
    return np.dtype(name)


class Tensor(ctypes.Structure):
    """shimkit_tensor: data pointer, sizes/strides (elements), ndim, dtype."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sizes", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
    ]


def dtype_code(name: str, ndim: int, index: int) -> int:
    """The shims' code for input `index`'s dtype `name` (a DTYPE_CODES name); a one-line
    error for a dtype they lack or more dimensions than a descriptor holds."""
    code = DTYPE_CODES.get(name)
    if code is None:
        raise ShimkitError(f"input {index}: unsupported dtype {name}")
    if ndim > MAX_DIMS:
        raise ShimkitError(f"input {index}: {ndim} dimensions (at most {MAX_DIMS})")
    return code


def descriptor(pointer: int, shape: tuple[int, ...], strides: tuple[int, ...], code: int) -> Tensor:
    """A shimkit_tensor of memory at `pointer` (strides in elements)."""
    desc = Tensor()
    desc.data = pointer
    desc.ndim = len(shape)
    desc.dtype = code
    for d, (size, stride) in enumerate(zip(shape, strides, strict=True)):
        desc.sizes[d] = size
        desc.strides[d] = stride
    return desc


class RuntimeLib:
    """The loaded runtime library with typed entry points."""

    def __init__(self, libs: RuntimeLibs) -> None:
        self.paths = libs
        try:
            self.lib = ctypes.CDLL(str(libs.runtime))
        except OSError as exc:
            raise ShimkitError(f"{libs.runtime}: cannot load the runtime: {exc}") from None
        try:
            self._declare()
        except AttributeError as exc:
            raise ShimkitError(f"{libs.runtime}: not a shimkit runtime library: {exc}") from None
        provider = self.provider_path()
        if provider is not None:
            self.paths = RuntimeLibs(shims=provider, runtime=libs.runtime)

    def _declare(self) -> None:
        lib = self.lib
        p, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        lib.shimkit_last_error.restype = ctypes.c_char_p
        lib.shimkit_provider_path.restype = ctypes.c_char_p
        lib.shimkit_runtime_prefix.restype = ctypes.c_char_p
        lib.shimkit_check_blob.argtypes = [ctypes.c_char_p, sz]
        lib.shimkit_check_blob.restype = i
        lib.shimkit_model_load.argtypes = [ctypes.c_char_p, sz, ctypes.POINTER(p)]
        lib.shimkit_model_load.restype = i
        lib.shimkit_model_free.argtypes = [p]
        lib.shimkit_model_free.restype = None
        lib.shimkit_model_num_inputs.argtypes = [p]
        lib.shimkit_model_num_inputs.restype = sz
        lib.shimkit_model_num_outputs.argtypes = [p]
        lib.shimkit_model_num_outputs.restype = sz
        lib.shimkit_model_set_check_inputs.argtypes = [p, i]
        lib.shimkit_model_set_check_inputs.restype = i
        lib.shimkit_model_allow_stand_ins.argtypes = [
            p,
            ctypes.POINTER(ctypes.c_char_p),
            sz,
            ctypes.POINTER(sz),
        ]
        lib.shimkit_model_allow_stand_ins.restype = i
        lib.shimkit_model_load_base.argtypes = [p]
        lib.shimkit_model_load_base.restype = ctypes.c_size_t
        lib.shimkit_model_input_name.argtypes = [p, sz]
        lib.shimkit_model_input_name.restype = ctypes.c_char_p
        lib.shimkit_model_run.argtypes = [p, ctypes.POINTER(Tensor), sz, ctypes.POINTER(Tensor), sz]
        lib.shimkit_model_run.restype = i
        lib.shimkit_model_run_into.argtypes = [
            p,
            ctypes.POINTER(Tensor),
            sz,
            ctypes.POINTER(Tensor),
            sz,
            ctypes.c_char_p,
        ]
        lib.shimkit_model_run_into.restype = i
        lib.shimkit_model_bench.argtypes = [
            p,
            ctypes.POINTER(Tensor),
            sz,
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_double),
        ]
        lib.shimkit_model_bench.restype = i

    def manual_seed(self, seed: int) -> None:
        """Seeds the shims' generator (random ops of the blobs this runtime runs)."""
        shims = ctypes.CDLL(str(self.paths.shims))  # loaded already: the same handle
        shims.shimkit_shim_manual_seed.argtypes = [ctypes.c_uint64]
        shims.shimkit_shim_manual_seed.restype = None
        shims.shimkit_shim_manual_seed(seed)

    def last_error(self) -> str:
        raw = self.lib.shimkit_last_error()
        return raw.decode("utf-8", "replace") if raw else "unknown error"

    def provider_path(self) -> Path | None:
        raw = self.lib.shimkit_provider_path()
        return Path(raw.decode()) if raw else None

    def prefix(self) -> str:
        """The shim prefix this runtime serves (compiled in)."""
        raw = self.lib.shimkit_runtime_prefix()
        return raw.decode() if raw else ""


_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], RuntimeLib] = {}
_PROVIDER: dict[str, tuple[str, Path]] = {}


def claim_provider(kind: str, runtime: Path) -> None:
    """Records that this process loads the `kind` ("cpu" or "cuda") slim runtime. The CPU
    and CUDA shim libraries export the same prefixed names, so a process holds one of them:
    asking for the other is refused in one line, before anything is loaded."""
    with _LOCK:
        held = _PROVIDER.setdefault("held", (kind, runtime))
    if held[0] != kind:
        raise ShimkitError(
            f"{runtime}: this process already loaded the slim {held[0].upper()} runtime "
            f"({held[1]}); the CPU and CUDA shims export the same names, so one process "
            f"holds one of them: run {kind.upper()} blobs in another process"
        )


def runtime_lib(variant: str = "release", config: ShimConfig | None = None) -> RuntimeLib:
    """The process-wide runtime library for `variant` and `config`'s prefix (default:
    `load_config()`), loaded once."""
    config = config or load_config()
    key = (variant, config.prefix)
    with _LOCK:
        loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    libs = find_libraries(variant, config)
    claim_provider("cpu", libs.runtime)
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = RuntimeLib(libs)
        return _LOADED[key]


def shim_library(config: ShimConfig | None = None) -> Path:
    """The slim CPU shim library serving `config`'s prefix: what a blob compiled for the
    CPU runtime may import (`shimkit.runtime.cuda.cuda_shim_library` for CUDA)."""
    libs = find_libraries(config=config)
    if libs.shims.is_file():
        return libs.shims
    provider = runtime_lib(config=config).provider_path()  # $SHIMKIT_LIB_DIR: the runtime knows
    if provider is None:
        raise ShimkitError(f"{libs.runtime}: does not name its shim library")
    return provider
