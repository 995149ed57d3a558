"""DLPack (https://dmlc.github.io/dlpack, version 0.8): the structures of
runtime/cuda/dlpack.h in ctypes, and the capsule protocol both ways.

A capsule named "dltensor" holds a DLManagedTensor. A consumer takes it by renaming the
capsule "used_dltensor" and calls the tensor's deleter when it is done; a capsule that dies
still named "dltensor" was never taken and calls the deleter itself. `capsule` exports
(DeviceTensor.__dlpack__), `Taken` consumes (inputs that offer `__dlpack__`).
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

from shimkit.errors import ShimkitError

KDL_CUDA = 2  # DLDeviceType kDLCUDA
CAPSULE_NAME = b"dltensor"
USED_CAPSULE_NAME = b"used_dltensor"

# (DLDataTypeCode, bits) -> the shims' dtype name (shimkit.runtime.capi.DTYPE_CODES); one lane.
DTYPES: dict[tuple[int, int], str] = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (4, 16): "bfloat16", (6, 8): "bool",
}  # fmt: skip


class DLTensor(ctypes.Structure):
    """DLPack's DLTensor: device and dtype as (type, id) and (code, bits, lanes) pairs;
    shape and strides (elements; strides NULL: C order) point at ndim int64s."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype_code", ctypes.c_uint8),
        ("dtype_bits", ctypes.c_uint8),
        ("dtype_lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(DLManagedTensor*)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


# Python's capsule API as function objects of our own: `ctypes.pythonapi.X` is one object
# per process, whose argtypes any other module may set.
_capsule_new = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)


def delete(managed: int) -> None:
    """Calls DLManagedTensor `managed`'s deleter (none: nothing to free)."""
    deleter = DLManagedTensor.from_address(managed).deleter
    if deleter:
        deleter(managed)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _delete_untaken(capsule: int) -> None:
    """The capsule destructor: a tensor no consumer took is freed with the capsule."""
    if _capsule_is_valid(capsule, CAPSULE_NAME):
        delete(_capsule_get_pointer(capsule, CAPSULE_NAME))


def capsule(managed: int) -> Any:
    """A "dltensor" capsule holding DLManagedTensor `managed` (freed with it if untaken)."""
    return _capsule_new(managed, CAPSULE_NAME, ctypes.cast(_delete_untaken, ctypes.c_void_p))


class Taken:
    """A DLManagedTensor taken from a producer's capsule: `tensor` describes it, and its
    deleter is called once, when this object goes."""

    def __init__(self, producer_capsule: Any) -> None:
        # The capsule API takes the object's address (id(): CPython's, as ctypes.pythonapi).
        if not _capsule_is_valid(id(producer_capsule), CAPSULE_NAME):
            raise ShimkitError(
                'not a DLPack "dltensor" capsule (taken already, or a versioned one)'
            )
        managed = _capsule_get_pointer(id(producer_capsule), CAPSULE_NAME)
        _capsule_set_name(producer_capsule, USED_CAPSULE_NAME)
        self._finalizer = weakref.finalize(self, delete, managed)
        self.tensor = DLManagedTensor.from_address(managed).dl_tensor
