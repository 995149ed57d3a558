"""Call the slim shims directly through ctypes, by their prefixed names."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
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
