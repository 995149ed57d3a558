"""Call the slim shims directly through ctypes, by their prefixed names (numpy arrays in
`Shims`, torch tensors of any dtype in `TorchShims`)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import torch
from shimkit.config import ShimConfig
from shimkit.runtime.capi import CODE_DTYPES, DTYPE_CODES

I64P = ctypes.POINTER(ctypes.c_int64)


class Shims:
    def __init__(self, lib: ctypes.CDLL, config: ShimConfig) -> None:
        self.lib = lib
        self.config = config
        self.lib.shimkit_shim_last_error.restype = ctypes.c_char_p
        self._keep: list[Any] = []

    def fn(self, name: str) -> Any:
        return getattr(self.lib, self.config.prefixed(name))

    def error(self) -> str:
        return self.lib.shimkit_shim_last_error().decode()

    def call(self, name: str, *args: Any) -> int:
        return int(self.fn(name)(*args))

    def ok(self, name: str, *args: Any) -> None:
        rc = self.call(name, *args)
        assert rc == 0, f"{name} failed: {self.error()}"

    def wrap(self, array: np.ndarray, offset: int = 0) -> ctypes.c_void_p:
        """A borrowed tensor over `array` (any strides; element offset into it)."""
        base = array
        self._keep.append(base)
        itemsize = array.itemsize
        sizes = (ctypes.c_int64 * array.ndim)(*array.shape)
        strides = (ctypes.c_int64 * array.ndim)(*[s // itemsize for s in array.strides])
        handle = ctypes.c_void_p()
        self.ok(
            "aoti_torch_create_tensor_from_blob",
            ctypes.c_void_p(array.ctypes.data - offset * itemsize),
            ctypes.c_int64(array.ndim),
            sizes,
            strides,
            ctypes.c_int64(offset),
            ctypes.c_int32(DTYPE_CODES[array.dtype.name]),
            ctypes.c_int32(0),
            ctypes.c_int32(-1),
            ctypes.byref(handle),
        )
        return handle

    def geometry(self, handle: ctypes.c_void_p) -> tuple[list[int], list[int], int]:
        ndim = ctypes.c_int64()
        self.ok("aoti_torch_get_dim", handle, ctypes.byref(ndim))
        sizes, strides = I64P(), I64P()
        self.ok("aoti_torch_get_sizes", handle, ctypes.byref(sizes))
        self.ok("aoti_torch_get_strides", handle, ctypes.byref(strides))
        offset = ctypes.c_int64()
        self.ok("aoti_torch_get_storage_offset", handle, ctypes.byref(offset))
        n = ndim.value
        return [sizes[i] for i in range(n)], [strides[i] for i in range(n)], offset.value

    def read(self, handle: ctypes.c_void_p) -> np.ndarray:
        """Copy of the tensor's elements, honouring its strides."""
        sizes, strides, _ = self.geometry(handle)
        dtype = ctypes.c_int32()
        self.ok("aoti_torch_get_dtype", handle, ctypes.byref(dtype))
        np_dtype = np.dtype(CODE_DTYPES[dtype.value])
        data = ctypes.c_void_p()
        self.ok("aoti_torch_get_data_ptr", handle, ctypes.byref(data))
        span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
        raw = (ctypes.c_char * (span * np_dtype.itemsize)).from_address(data.value)
        flat = np.frombuffer(raw, dtype=np_dtype, count=span)
        view = np.lib.stride_tricks.as_strided(
            flat, shape=sizes, strides=[s * np_dtype.itemsize for s in strides]
        )
        return np.array(view)

    def free(self, handle: ctypes.c_void_p) -> None:
        self.ok("aoti_torch_delete_tensor_object", handle)


TORCH_CODES = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.bool: 11,
    torch.bfloat16: 15,
}
CODE_TORCH = {code: dt for dt, code in TORCH_CODES.items()}
Handle = ctypes.c_void_p


class TorchShims(Shims):
    """Shims with torch tensors in and out (any dtype, bfloat16 included)."""

    def tensor(self, t: torch.Tensor) -> Handle:
        self._keep.append(t)
        handle = Handle()
        self.ok(
            "aoti_torch_create_tensor_from_blob",
            ctypes.c_void_p(t.data_ptr() - t.storage_offset() * t.element_size()),
            ctypes.c_int64(t.dim()),
            ints(*t.shape),
            ints(*t.stride()),
            ctypes.c_int64(t.storage_offset()),
            ctypes.c_int32(TORCH_CODES[t.dtype]),
            ctypes.c_int32(0),
            ctypes.c_int32(-1),
            ctypes.byref(handle),
        )
        return handle

    def torch(self, handle: Handle, free: bool = True) -> torch.Tensor:
        """A copy of the tensor (same sizes and strides); frees the handle."""
        sizes, strides, _ = self.geometry(handle)
        code, data = ctypes.c_int32(), ctypes.c_void_p()
        self.ok("aoti_torch_get_dtype", handle, ctypes.byref(code))
        self.ok("aoti_torch_get_data_ptr", handle, ctypes.byref(data))
        dtype = CODE_TORCH[code.value]
        itemsize = torch.empty(0, dtype=dtype).element_size()
        span = (
            0 if 0 in sizes else 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
        )
        raw = (
            bytearray(ctypes.string_at(data.value, span * itemsize))
            if span
            else bytearray(itemsize)
        )
        flat = torch.frombuffer(raw, dtype=dtype) if span else torch.empty(1, dtype=dtype)
        out = torch.empty_strided(sizes, strides, dtype=dtype)
        if span:
            out.copy_(flat.as_strided(sizes, strides))
        if free:
            self.free(handle)
        return out


def ints(*values: int) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


def outs(n: int) -> list[Handle]:
    return [Handle() for _ in range(n)]
