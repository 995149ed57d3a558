"""GPU memory in and out of the CUDA runtime without a host copy.

Inputs are torch CUDA tensors, objects with `__cuda_array_interface__` (CuPy, Numba) or
DLPack producers on CUDA (`__dlpack__`: JAX, ...): `device_input` reads where they are.
Outputs are `DeviceTensor`s, memory the slim CUDA shims allocated, which a consumer takes
in place through DLPack (`torch.from_dlpack(out)`, `cupy.from_dlpack(out)`, `jax.dlpack`)
or `__cuda_array_interface__` (`cupy.asarray(out)`); `torch_tensor` turns one into a
torch tensor sharing it.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from shimkit.errors import ShimkitError
from shimkit.runtime import dlpack
from shimkit.runtime.blob import InputSpec, check_input_spec, dense_strides, is_dense_in
from shimkit.runtime.capi import (
    CODE_DTYPES,
    DTYPE_CODES,
    Tensor,
    descriptor,
    dtype_code,
    numpy_dtype,
)

# __cuda_array_interface__ "stream" values that name the legacy default stream (1; torch
# reports its default stream, that one, as 0): work on it is ordered before an eager run,
# which the runner issues there, and before a replay, which waits for it first. Any other
# stream (2, the per-thread default, included) is waited for by the caller.
LEGACY_STREAMS = (0, 1)


@dataclass(frozen=True)
class DeviceArray:
    """An input in GPU memory: where it starts, its geometry (strides in elements) and the
    stream its producer used (None: nothing to wait for)."""

    pointer: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str  # a DTYPE_CODES name
    stream: int | None
    device_index: int | None  # None: the interface does not say
    holder: Any = field(default=None, compare=False, repr=False)  # keeps the memory alive

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def descriptor(self) -> Tensor:
        return descriptor(self.pointer, self.shape, self.strides, DTYPE_CODES[self.dtype])


def is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _dlpack_device(value: Any) -> tuple[int, int] | None:
    """What `value.__dlpack_device__()` says, or None (no DLPack, or it fails)."""
    try:
        device_type, device_id = value.__dlpack_device__()
        return int(device_type), int(device_id)
    except Exception:  # a producer's own failure: not DLPack memory to us
        return None


def on_device(value: Any) -> bool:
    """Whether `value` is GPU memory: a CUDA torch tensor, a `__cuda_array_interface__`
    object (torch's CPU tensors have no such attribute) or a DLPack producer on CUDA."""
    if is_torch_tensor(value):
        return bool(value.is_cuda)
    if hasattr(value, "__cuda_array_interface__"):
        return True
    device = _dlpack_device(value) if hasattr(value, "__dlpack_device__") else None
    return device is not None and device[0] == dlpack.KDL_CUDA


def _checked(array: DeviceArray, index: int) -> DeviceArray:
    dtype_code(array.dtype, array.ndim, index)
    return array


def _from_torch(tensor: Any, index: int, order: tuple[int, ...] | None, stream: int) -> DeviceArray:
    tensor = tensor.detach()
    shape = tuple(tensor.shape)
    if order is None:
        tensor = tensor.contiguous()
    elif tensor.stride() != dense_strides(shape, order):
        # Compiled for another memory order (channels-last): lay it out so.
        tensor = tensor.permute(order).contiguous().permute(tuple(np.argsort(order)))
    name = str(tensor.dtype).removeprefix("torch.")
    array = DeviceArray(
        tensor.data_ptr(), shape, tuple(tensor.stride()), name, stream,
        tensor.device.index, tensor,
    )  # fmt: skip
    return _checked(array, index)


def _from_interface(value: Any, index: int) -> DeviceArray:
    try:
        interface = value.__cuda_array_interface__
        pointer = int(interface["data"][0])
        shape = tuple(int(n) for n in interface["shape"])
        dtype = np.dtype(interface["typestr"])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ShimkitError(f"input {index}: bad __cuda_array_interface__: {exc}") from None
    if interface.get("mask") is not None:
        raise ShimkitError(f"input {index}: masked device arrays are not supported")
    if dtype.byteorder == ">":
        raise ShimkitError(f"input {index}: big-endian device arrays are not supported")
    dtype = dtype.newbyteorder("=")
    byte_strides = interface.get("strides")
    if byte_strides is None:  # C-contiguous
        strides = dense_strides(shape, tuple(range(len(shape))))
    else:
        if any(int(s) % dtype.itemsize for s in byte_strides):
            raise ShimkitError(f"input {index}: strides {byte_strides} are not whole elements")
        strides = tuple(int(s) // dtype.itemsize for s in byte_strides)
    stream = interface.get("stream")
    array = DeviceArray(pointer, shape, strides, dtype.name, stream, None, value)
    return _checked(array, index)


def _from_dlpack(value: Any, index: int) -> DeviceArray:
    """A DLPack producer's tensor, taken (its deleter runs when the DeviceArray goes). Asked
    for with the legacy default stream as the consumer's, so the producer orders its work
    before that stream, which the run follows: nothing left to wait for."""
    try:
        taken = dlpack.Taken(value.__dlpack__(stream=LEGACY_STREAMS[1]))
    except ShimkitError as exc:
        raise ShimkitError(f"input {index}: {exc}") from None
    except Exception as exc:  # the producer's own failure, named
        raise ShimkitError(f"input {index}: __dlpack__ failed: {exc}") from None
    t = taken.tensor
    if t.device_type != dlpack.KDL_CUDA:
        raise ShimkitError(f"input {index}: DLPack device type {t.device_type} is not CUDA")
    dtype = dlpack.DTYPES.get((t.dtype_code, t.dtype_bits)) if t.dtype_lanes == 1 else None
    if dtype is None:
        raise ShimkitError(
            f"input {index}: unsupported DLPack dtype (code {t.dtype_code}, "
            f"{t.dtype_bits} bits, {t.dtype_lanes} lanes)"
        )
    shape = tuple(int(t.shape[d]) for d in range(t.ndim))
    if t.strides:
        strides = tuple(int(t.strides[d]) for d in range(t.ndim))
    else:  # NULL: C order
        strides = dense_strides(shape, tuple(range(t.ndim)))
    pointer = int(t.data or 0) + int(t.byte_offset)
    return _checked(DeviceArray(pointer, shape, strides, dtype, None, t.device_id, taken), index)


def device_input(
    value: Any, index: int, order: tuple[int, ...] | None, torch_stream: int = 0
) -> DeviceArray:
    """Where input `index` lies in GPU memory. A torch tensor is made dense in `order`
    (C order when None) if it is not, its producer's stream taken as `torch_stream`
    (torch's current stream at the call); another object (`__cuda_array_interface__`,
    which names its stream, or else DLPack) must already be dense."""
    if is_torch_tensor(value):
        return _from_torch(value, index, order, torch_stream)
    if hasattr(value, "__cuda_array_interface__"):
        array = _from_interface(value, index)
    else:
        array = _from_dlpack(value, index)
    c_order = tuple(range(array.ndim))
    if not is_dense_in(array.shape, array.strides, order if order is not None else c_order):
        raise ShimkitError(
            f"input {index}: device array with strides {list(array.strides)} (elements) is "
            "not laid out densely in the order the blob was compiled for; pass a copy that is"
        )
    return array


def device_inputs(
    values: Sequence[Any], specs: Sequence[InputSpec] | None, device_index: int
) -> list[DeviceArray]:
    """Where each of `values` lies on GPU `device_index`, checked against the blob's
    recorded `specs` (dtype, sizes, memory order) when it has them."""
    arrays = []
    torch_stream = None  # torch orders its work on its current stream: asked once a call
    for i, value in enumerate(values):
        if not on_device(value):
            raise ShimkitError(
                f"input {i} is in host memory and another input on the GPU: pass all on the "
                "GPU (outputs stay there) or all on the host"
            )
        spec = specs[i] if specs is not None else None
        if torch_stream is None and is_torch_tensor(value):
            torch_stream = sys.modules["torch"].cuda.current_stream(device_index).cuda_stream
        order = spec.order if spec is not None else None
        array = device_input(value, i, order, torch_stream or 0)
        if array.device_index not in (None, device_index):
            raise ShimkitError(
                f"input {i} is on cuda:{array.device_index}, the model on cuda:{device_index}"
            )
        if spec is not None:
            check_input_spec(array.dtype, array.shape, spec, i)
        arrays.append(array)
    return arrays


class OutputMemory(Protocol):
    """What a DeviceTensor needs of the runtime that made it (shimkit.runtime.cuda's
    CudaRuntime): give an output back, and export it as a DLPack DLManagedTensor."""

    def free_output(self, owner: int) -> None: ...

    def export_dlpack(self, owner: int) -> int: ...


class DeviceTensor:
    """A model output in GPU memory the slim CUDA shims own, freed when this object (and
    every tensor sharing it) is gone. Consumers read it in place through DLPack
    (`__dlpack__`, version 0.8) or `__cuda_array_interface__` (version 3); it is computed
    before it is returned, so neither needs a stream to wait for. Memory goes back to the
    shims' cache for the legacy default stream: work on another stream that reads it must
    be waited for before the last reference goes."""

    def __init__(self, desc: Tensor, owner: int, device_index: int, memory: OutputMemory) -> None:
        name = CODE_DTYPES.get(desc.dtype)
        if name is None:  # the caller still owns `owner`
            raise ShimkitError(f"output dtype code {desc.dtype} has no numpy equivalent")
        self._memory = memory
        self._owner = owner
        self._finalizer = weakref.finalize(self, memory.free_output, owner)
        self._finalizer.atexit = False  # the process's exit returns the memory
        self.dtype_name = name
        self.pointer = int(desc.data or 0)
        self.shape = tuple(int(desc.sizes[d]) for d in range(desc.ndim))
        self.strides = tuple(int(desc.strides[d]) for d in range(desc.ndim))  # elements
        self.device_index = device_index

    @property
    def device(self) -> str:
        return f"cuda:{self.device_index}"

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype_name)

    def _interface(self, typestr: str, itemsize: int) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": typestr,
            "data": (self.pointer, False),
            "strides": tuple(s * itemsize for s in self.strides),
            "stream": None,
            "version": 3,
        }

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.dtype_name == "bfloat16":  # the interface has no type string for it
            raise TypeError("bfloat16 has no __cuda_array_interface__ type string")
        dtype = np.dtype(self.dtype_name)
        return self._interface(dtype.str, dtype.itemsize)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, self.device_index)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule sharing this tensor's memory (the unversioned DLManagedTensor
        every consumer takes, whatever `max_version` it offers). The tensor is computed
        already, so `stream` needs no wait; copies and other devices are refused."""
        if copy:
            raise BufferError("DeviceTensor exports its memory only: copy=True is refused")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceTensor lies on {self.device}, not on DLPack {dl_device}")
        return dlpack.capsule(self._memory.export_dlpack(self._owner))

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={list(self.shape)}, dtype={self.dtype_name}, {self.device})"


def torch_tensor(tensor: DeviceTensor) -> Any:
    """A torch tensor sharing `tensor`'s memory (through a DLPack capsule: no stream
    handshake, the tensor is computed)."""
    import torch

    return torch.from_dlpack(tensor.__dlpack__())
