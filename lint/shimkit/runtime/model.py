"""`shimkit.runtime.load(path) -> Model`: call it with arrays, get arrays back."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError
from shimkit.runtime import fastcall
from shimkit.runtime.admit import refuse_unless_clean, served_config
from shimkit.runtime.blob import (
    BlobSource,
    LoadedBlob,
    as_array,
    check_input_spec,
    dense_in_order,
    read_blob,
)
from shimkit.runtime.capi import (
    CODE_DTYPES,
    RuntimeLib,
    Tensor,
    dtype_code,
    numpy_dtype,
    runtime_lib,
)

if TYPE_CHECKING:
    from shimkit.runtime.cuda import CudaModel


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _address(array: np.ndarray) -> int:
    """Address of a C-contiguous array's first byte (fast path via ctypes)."""
    try:
        return _addressof(_from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty
        return int(array.ctypes.data)


def _decline(inputs: Sequence[Any]) -> None:
    """The fast path when there is none: always take the Python path."""
    return None


class Model(LoadedBlob):
    """A loaded blob. Not copyable; `close()` (or GC) unloads it."""

    def __init__(
        self,
        source: BlobSource,
        variant: str = "release",
        lint: bool = True,
        config: ShimConfig | None = None,
    ) -> None:
        self.source = source
        self._handle: ctypes.c_void_p | None = None
        self._lock: Any = threading.Lock()
        self._fast: Any = None  # the C extension's Runner, if any
        self._fast_run: Any = _decline
        config = config or load_config()
        self._rt: RuntimeLib = runtime_lib(variant, config)
        if lint:
            self._lint(config)
        handle = ctypes.c_void_p()
        rc = self._rt.lib.shimkit_model_load(source.data, len(source.data), ctypes.byref(handle))
        if rc != 0:
            raise ShimkitError(f"{self._where()}: {self._rt.last_error()}")
        self._handle = handle
        self.source = source.without_bytes()
        self.stand_ins = self._allow_stand_ins(source.stand_ins)
        self.num_inputs = int(self._rt.lib.shimkit_model_num_inputs(handle))
        self.num_outputs = int(self._rt.lib.shimkit_model_num_outputs(handle))
        specs = source.inputs
        if specs is not None and len(specs) != self.num_inputs:
            specs = None  # metadata disagrees with the blob: trust the blob
        self.input_specs = specs
        if specs is not None and all(
            spec.dtype is not None and spec.shape is not None and None not in spec.shape
            for spec in specs
        ):
            # Fully known inputs are validated here (dtype and shape; arrays are
            # passed in the layout the blob was compiled for), so the blob need not
            # re-check every call.
            self._rt.lib.shimkit_model_set_check_inputs(handle, 0)
        # Inputs compiled for a layout other than row-major (channels-last example
        # inputs): input index -> memory order. They take the Python path, which lays
        # each one out that way (the C extension passes row-major arrays only).
        self._orders = {
            i: spec.order for i, spec in enumerate(specs or ()) if spec.order is not None
        }
        self._in = (Tensor * max(self.num_inputs, 1))()
        self._out = (Tensor * max(self.num_outputs, 1))()
        self._geometry: list[tuple[Any, ...] | None] = [None] * self.num_inputs
        self._last_inputs: list[Any] = [None] * self.num_inputs
        # Output shape/dtype seen last time: the next call preallocates them and
        # the C side copies straight into them (one ctypes call per run).
        self._out_geometry: list[tuple[tuple[int, ...], np.dtype] | None] = [
            None
        ] * self.num_outputs
        self._copied = (ctypes.c_uint8 * max(self.num_outputs, 1))()
        # The hot call skips ctypes' per-argument conversions: a separate
        # function object without argtypes, fed pre-built arguments.
        self._run_into = self._rt.lib["shimkit_model_run_into"]
        self._run_into.restype = ctypes.c_int
        self._run_args = (
            handle,
            ctypes.byref(self._in),
            ctypes.c_size_t(self.num_inputs),
            ctypes.byref(self._out),
            ctypes.c_size_t(self.num_outputs),
            ctypes.byref(self._copied),
        )
        # The C extension's hot call (None: ctypes only). It shares the
        # descriptor arrays above and takes over once the Python path has
        # validated the input geometry and seen the output geometry.
        ext = fastcall.module()
        if ext is not None and not self._orders:
            self._fast = ext.Runner(
                ctypes.cast(self._rt.lib.shimkit_model_run, ctypes.c_void_p).value,
                handle.value,
                ctypes.addressof(self._in),
                self.num_inputs,
                ctypes.addressof(self._out),
                self.num_outputs,
                (self._in, self._out),
            )
            self._fast_run = self._fast.run
            # One lock for both paths: the Runner's, taken in C by its run and
            # by `with self._lock` here (the GIL is released while waiting).
            self._lock = self._fast

    def _allow_stand_ins(self, fqns: Sequence[str]) -> int:
        """Lets the shims' packed copies stand in for the constants the wrapper source
        shows the blob reads only through shim calls; returns how many the shims took."""
        names = (ctypes.c_char_p * max(len(fqns), 1))(*(n.encode() for n in fqns))
        allowed = ctypes.c_size_t()
        rc = self._rt.lib.shimkit_model_allow_stand_ins(
            self._handle, names, len(fqns), ctypes.byref(allowed)
        )
        if rc != 0:
            raise ShimkitError(f"{self._where()}: {self._rt.last_error()}")
        return int(allowed.value)

    def _lint(self, config: ShimConfig) -> None:
        """The shimkit linter, in process, before anything is loaded, with the prefix the
        runtime serves (a blob for another prefix gets one line saying so)."""
        provider = self._rt.provider_path()
        if provider is None:
            raise ShimkitError(f"{self._rt.paths.runtime}: {self._rt.last_error()}")
        served = served_config(config, self._rt.prefix(), self._rt.paths.runtime)
        refuse_unless_clean(self.source.data, self._where(), served, provider, "cpu")

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def load_base(self) -> int:
        """Where the blob is mapped (for reading its resolved GOT entries)."""
        if self._handle is None:
            raise ShimkitError(f"{self._where()}: model is closed")
        return int(self._rt.lib.shimkit_model_load_base(self._handle))

    @property
    def input_names(self) -> list[str | None]:
        names: list[str | None] = []
        for i in range(self.num_inputs):
            raw = self._rt.lib.shimkit_model_input_name(self._handle, i)
            names.append(raw.decode() if raw else None)
        return names

    def _prepare(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """Arrays to pass (kept alive by the caller); fills the input descriptors. An
        error names the file and the input."""
        try:
            return self._described(inputs)
        except ShimkitError as exc:
            raise ShimkitError(f"{self._where()}: {exc}") from None

    def _described(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        if self._handle is None:
            raise ShimkitError("model is closed")
        if len(inputs) != self.num_inputs:
            raise ShimkitError(f"model takes {self.num_inputs} inputs, got {len(inputs)}")
        arrays = []
        geometry = self._geometry
        last = self._last_inputs
        descs = self._in
        for i, value in enumerate(inputs):
            order = self._orders.get(i)
            if order is not None:
                array = value if type(value) is np.ndarray else as_array(value, i)
                if geometry[i] != (array.shape, array.dtype.num):
                    self._describe_input(i, array)
                    geometry[i] = (array.shape, array.dtype.num)
                array = dense_in_order(np.asarray(array, array.dtype.newbyteorder("=")), order)
                descs[i].data = int(array.ctypes.data)  # element 0: every stride is positive
                for d, stride in enumerate(array.strides):
                    descs[i].strides[d] = stride // array.itemsize
                arrays.append(array)
                continue
            if (
                value is last[i]
                and value is not None
                and (value.shape, value.dtype.num) == geometry[i]
                and value.flags.c_contiguous
            ):
                # Same contiguous array, shape and dtype as last call (we hold a
                # reference, so it cannot have been reallocated): the
                # descriptor, data pointer included, is still right.
                arrays.append(value)
                continue
            array = value if type(value) is np.ndarray else as_array(value, i)
            key = (array.shape, array.dtype.num)
            if geometry[i] != key:
                self._describe_input(i, array)
                geometry[i] = key
            if array.flags.c_contiguous and array.dtype.isnative:
                last[i] = array if array is value else None
            else:
                array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
                last[i] = None
            descs[i].data = _address(array)
            arrays.append(array)
        return arrays

    def _describe_input(self, i: int, array: np.ndarray) -> None:
        if self.input_specs is not None:
            check_input_spec(array.dtype.name, array.shape, self.input_specs[i], i)
        code = dtype_code(array.dtype.name, array.ndim, i)
        desc = self._in[i]
        desc.ndim, desc.dtype = array.ndim, code
        stride = 1
        for d in range(array.ndim - 1, -1, -1):
            desc.sizes[d] = array.shape[d]
            desc.strides[d] = stride
            stride *= max(array.shape[d], 1)
        if self._fast is not None:
            self._fast.describe_input(i, array.dtype.num)

    def __call__(self, *inputs: Any) -> list[np.ndarray]:
        # The descriptors are per model and both paths drop the GIL during the
        # run: one call at a time per Model (the C side serialises runs too).
        # The fast path (the extension's Runner) takes that lock itself, in C.
        result = self._fast_run(inputs)
        if type(result) is list:
            return result
        return self._not_fast(inputs, result)

    def _not_fast(self, inputs: Sequence[Any], result: Any) -> list[np.ndarray]:
        """The Python path, or the end of a fast call that did not finish."""
        if result is None:  # declined: nothing ran
            with self._lock:
                return self._call(inputs)
        if isinstance(result, int):  # ran and failed (the error is per thread)
            message = self._rt.last_error()
            with self._lock:
                self._forget_outputs()
            raise ShimkitError(f"{self._where()}: {message}")
        # Ran, but some outputs changed geometry and stayed in model-owned
        # memory: the Runner kept its lock held for us to copy them out.
        try:
            results = result[0]
            for i, value in enumerate(results):
                if value is None:
                    results[i] = self._output(i)
            return results
        finally:
            self._fast.__exit__(None, None, None)

    def _forget_outputs(self) -> None:
        """After a failed run the output descriptors may describe anything:
        the next run passes no buffers, and both paths learn the outputs again."""
        self._out_geometry = [None] * self.num_outputs
        if self._fast is not None:
            self._fast.forget_outputs()

    @property
    def fast_calls(self) -> int:
        """Runs done by the C extension's fast path (0 when it is off)."""
        return int(self._fast.fast_calls) if self._fast is not None else 0

    def _call(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        keep_alive = self._prepare(inputs)
        results: list[Any] = []
        outs = self._out
        for i, geometry in enumerate(self._out_geometry):
            if geometry is not None:
                # The runtime copies into the buffer only if the result has
                # exactly the descriptor's ndim, sizes and dtype; after every
                # completed run those are this geometry (see _forget_outputs).
                buffer = np.empty(geometry[0], geometry[1])
                outs[i].data = _address(buffer)
                results.append(buffer)
            else:
                outs[i].data = None
                results.append(None)
        rc = self._run_into(*self._run_args)
        del keep_alive
        if rc != 0:
            self._forget_outputs()
            raise ShimkitError(f"{self._where()}: {self._rt.last_error()}")
        copied = self._copied
        for i in range(self.num_outputs):
            if not copied[i]:
                results[i] = self._output(i)
        return results

    def _output(self, index: int) -> np.ndarray:
        """Copy of an output the model owns; remembers its geometry for next time."""
        desc = self._out[index]
        name = CODE_DTYPES.get(desc.dtype)
        if name is None:
            raise ShimkitError(f"output {index}: dtype code {desc.dtype} has no numpy equivalent")
        dtype = numpy_dtype(name)
        shape = tuple(desc.sizes[: desc.ndim])
        strides = tuple(desc.strides[: desc.ndim])
        self._out_geometry[index] = (shape, dtype)
        if self._fast is not None:
            self._fast.describe_output(index, dtype.num, desc.dtype, shape)
        if 0 in shape:
            return np.empty(shape, dtype)
        span = 1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
        buffer = (ctypes.c_char * (span * dtype.itemsize)).from_address(desc.data)
        flat = np.frombuffer(buffer, dtype=dtype, count=span)
        view = np.lib.stride_tricks.as_strided(
            flat, shape=shape, strides=tuple(st * dtype.itemsize for st in strides)
        )
        return np.array(view, copy=True)

    def bench(self, *inputs: Any, iterations: int = 1000) -> float:
        """Mean ns per run of the C run loop alone (no Python in the loop)."""
        with self._lock:
            keep_alive = self._prepare(inputs)
            result = ctypes.c_double()
            rc = self._rt.lib.shimkit_model_bench(
                self._handle, self._in, self.num_inputs, iterations, ctypes.byref(result)
            )
        del keep_alive
        if rc != 0:
            raise ShimkitError(f"{self._where()}: {self._rt.last_error()}")
        return float(result.value)

    def close(self) -> None:
        with self._lock:
            if self._fast is not None:
                self._fast.detach()
            self._fast_run = _decline
            if self._handle is not None:
                self._rt.lib.shimkit_model_free(self._handle)
                self._handle = None


def load(
    path: str | os.PathLike[str],
    *,
    device: str = "cpu",
    graphs: bool = False,
    variant: str = "release",
    lint: bool = True,
    config: ShimConfig | None = None,
) -> Model | CudaModel:
    """Load a `.pt2` package or a blob `.so` onto the slim runtime of `device`.

    `device`: "cpu" (the slim CPU runtime) or "cuda" / "cuda:N" (the slim CUDA
    runtime; `graphs=True` replays each run as a CUDA graph after an eager
    warm-up). With `lint` (default) the shimkit linter checks the blob in process
    first, with `config` (default: `load_config()`); the C loader then checks its
    ELF imports and entry points itself before dlopen either way.
    """
    from shimkit.runtime.cuda import CudaModel, parse_device

    index = parse_device(device)
    source = read_blob(Path(path))
    if index is not None:
        return CudaModel(source, index, graphs=graphs, lint=lint, config=config)
    if graphs:
        raise ShimkitError(f"{path}: graphs=True replays CUDA graphs; it needs device='cuda'")
    return Model(source, variant=variant, lint=lint, config=config)


def manual_seed(seed: int, device: str = "cpu") -> None:
    """Seed the generator the random ops of blobs on `device`'s slim runtime draw from
    (torch.rand, randn, ... inside a model; as torch.manual_seed does torch's): after the
    same seed a model's random values repeat (they differ from torch's own). Unseeded, the
    generator starts from $SHIMKIT_SEED, else from the system's entropy."""
    from shimkit.runtime.cuda import cuda_runtime, parse_device

    if not 0 <= seed < 2**64:
        raise ShimkitError(f"manual_seed: the seed must be in [0, 2**64), got {seed}")
    if parse_device(device) is None:
        runtime_lib().manual_seed(seed)
    else:
        cuda_runtime().manual_seed(seed)
