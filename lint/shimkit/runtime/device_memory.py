"""GPU memory in and out of the CUDA runtime without a host copy.

Inputs are torch CUDA tensors or any object with `__cuda_array_interface__` (CuPy, Numba,
JAX through DLPack-to-CuPy...): `device_input` reads where they are. Outputs are
`DeviceTensor`s, memory the slim CUDA shims allocated, which a consumer reads in place
through `__cuda_array_interface__` (`torch.as_tensor(out, device="cuda")`,
`cupy.asarray(out)`), or `torch_tensor` turns into a torch tensor sharing it.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shimkit.errors import ShimkitError
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


def on_device(value: Any) -> bool:
    """Whether `value` is GPU memory: a CUDA torch tensor or a `__cuda_array_interface__`
    object (torch's CPU tensors have no such attribute)."""
    if is_torch_tensor(value):
        return bool(value.is_cuda)
    return hasattr(value, "__cuda_array_interface__")


def _checked(array: DeviceArray, index: int) -> DeviceArray:
    dtype_code(array.dtype, array.ndim, index)
    return array


def _from_torch(tensor: Any, index: int, order: tuple[int, ...] | None) -> DeviceArray:
    import torch

    tensor = tensor.detach()
    shape = tuple(tensor.shape)
    if order is None:
        tensor = tensor.contiguous()
    elif tensor.stride() != dense_strides(shape, order):
        # Compiled for another memory order (channels-last): lay it out so.
        tensor = tensor.permute(order).contiguous().permute(tuple(np.argsort(order)))
    name = str(tensor.dtype).removeprefix("torch.")
    stream = torch.cuda.current_stream(tensor.device).cuda_stream
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


def device_input(value: Any, index: int, order: tuple[int, ...] | None) -> DeviceArray:
    """Where input `index` lies in GPU memory. A torch tensor is made dense in `order`
    (C order when None) if it is not; another interface object must already be."""
    if is_torch_tensor(value):
        return _from_torch(value, index, order)
    array = _from_interface(value, index)
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
    for i, value in enumerate(values):
        if not on_device(value):
            raise ShimkitError(
                f"input {i} is in host memory and another input on the GPU: pass all on the "
                "GPU (outputs stay there) or all on the host"
            )
        spec = specs[i] if specs is not None else None
        array = device_input(value, i, spec.order if spec is not None else None)
        if array.device_index not in (None, device_index):
            raise ShimkitError(
                f"input {i} is on cuda:{array.device_index}, the model on cuda:{device_index}"
            )
        if spec is not None:
            check_input_spec(array.dtype, array.shape, spec, i)
        arrays.append(array)
    return arrays


class DeviceTensor:
    """A model output in GPU memory the slim CUDA shims own, freed when this object (and
    every tensor sharing it) is gone. Read it in place through `__cuda_array_interface__`
    (version 3; computed before it is returned, so "stream" is None). Memory goes back to
    the shims' cache for the legacy default stream: work on another stream that reads it
    must be waited for before the last reference goes."""

    def __init__(
        self, desc: Tensor, owner: int, device_index: int, free: Callable[[int], None]
    ) -> None:
        name = CODE_DTYPES.get(desc.dtype)
        if name is None:  # the caller still owns `owner`
            raise ShimkitError(f"output dtype code {desc.dtype} has no numpy equivalent")
        self._finalizer = weakref.finalize(self, free, owner)
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

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={list(self.shape)}, dtype={self.dtype_name}, {self.device})"


class _Int16View:
    """A bfloat16 DeviceTensor seen as int16 (what torch's interface reader accepts); holds
    the tensor so the memory lives as long as torch's view of it."""

    def __init__(self, tensor: DeviceTensor) -> None:
        self.tensor = tensor
        self.__cuda_array_interface__ = tensor._interface("<i2", 2)


def torch_tensor(tensor: DeviceTensor) -> Any:
    """A torch tensor sharing `tensor`'s memory (torch holds `tensor` until it is freed)."""
    import torch

    device = torch.device("cuda", tensor.device_index)
    if tensor.dtype_name == "bfloat16":
        return torch.as_tensor(_Int16View(tensor), device=device).view(torch.bfloat16)
    return torch.as_tensor(tensor, device=device)
