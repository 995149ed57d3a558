"""shimkit.runtime.device_memory without a GPU: how inputs in GPU memory are read from their
`__cuda_array_interface__`, the checks that refuse them in one line, and who frees an output.
The runs themselves: tests/cuda/test_cuda_device_memory.py."""

from __future__ import annotations

import ctypes
import gc
from typing import Any, ClassVar

import numpy as np
import pytest
from shimkit.errors import ShimkitError
from shimkit.runtime import dlpack
from shimkit.runtime.blob import InputSpec
from shimkit.runtime.capi import DTYPE_CODES, Tensor
from shimkit.runtime.device_memory import DeviceTensor, device_inputs, on_device
from shimkit.runtime.dlpack import Deleter, DLManagedTensor


class OnDevice:
    """An object with a `__cuda_array_interface__`, as CuPy or Numba hand over."""

    def __init__(self, array: np.ndarray, **overrides: Any) -> None:
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "strides": None,
            "data": (array.ctypes.data, False),
            "version": 3,
            "stream": None,
            **overrides,
        }


class Producer:
    """A DLPack producer on CUDA (as JAX): a DLManagedTensor over `array` whose deleter is
    recorded; `strides` None exports NULL strides (C order). An exported tensor lives until
    its deleter runs, as a real producer's: `exported` keeps every producer that exported."""

    exported: ClassVar[list[Producer]] = []

    def __init__(self, array: np.ndarray, strides: Any = "c", lanes: int = 1) -> None:
        self.array = array
        self.streams: list[Any] = []
        self.deleted: list[int] = []
        self.deleter = Deleter(self.deleted.append)
        self.shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        element_strides = [s // array.itemsize for s in array.strides]
        self.strides = None if strides is None else (ctypes.c_int64 * array.ndim)(*element_strides)
        code = {"f": 2, "i": 0, "u": 1, "b": 6}[array.dtype.kind]
        self.managed = DLManagedTensor(deleter=self.deleter)
        t = self.managed.dl_tensor
        t.data, t.device_type, t.device_id, t.ndim = array.ctypes.data, 2, 0, array.ndim
        t.dtype_code, t.dtype_bits, t.dtype_lanes = code, array.itemsize * 8, lanes
        t.shape = self.shape
        if self.strides is not None:
            t.strides = self.strides

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, *, stream: Any = None) -> Any:
        self.streams.append(stream)
        Producer.exported.append(self)
        return dlpack.capsule(ctypes.addressof(self.managed))


def test_a_dlpack_producer_is_taken_and_freed_once_after_the_call() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    producer = Producer(x, strides=None)
    assert on_device(producer)
    (array,) = device_inputs([producer], [InputSpec("float32", (2, 3, 4))], 0)
    assert (array.pointer, array.shape, array.strides) == (x.ctypes.data, (2, 3, 4), (12, 4, 1))
    assert (array.dtype, array.stream, array.device_index) == ("float32", None, 0)
    # Asked with the legacy default stream: the producer orders its work before the run.
    assert producer.streams == [1]
    # Held (renamed capsule, nothing freed) while the input is in use; freed once after.
    assert producer.deleted == []
    del array
    gc.collect()
    assert producer.deleted == [ctypes.addressof(producer.managed)]
    # Explicit element strides, bfloat16 and bool by their DLPack codes.
    (explicit,) = device_inputs([Producer(np.zeros((3, 2), np.int64))], None, 0)
    assert (explicit.shape, explicit.strides, explicit.dtype) == ((3, 2), (2, 1), "int64")
    # Refused in one line, each freeing what it took: vector lanes, non-dense strides, a
    # failing producer; a CPU producer is host memory (numpy arrays are DLPack too).
    lanes = Producer(np.zeros(4, np.float32), lanes=4)
    with pytest.raises(ShimkitError, match=r"input 0: unsupported DLPack dtype .*4 lanes"):
        device_inputs([lanes], None, 0)
    strided = Producer(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ShimkitError, match=r"input 0: device array with strides \[4, 2\]"):
        device_inputs([strided], None, 0)
    gc.collect()
    assert len(lanes.deleted) == 1 and len(strided.deleted) == 1

    class Failing(Producer):
        def __dlpack__(self, *, stream: Any = None) -> Any:
            raise RuntimeError("device lost")

    with pytest.raises(ShimkitError, match="input 0: __dlpack__ failed: device lost"):
        device_inputs([Failing(x)], None, 0)
    assert not on_device(np.zeros(3))
    with pytest.raises(ShimkitError, match="input 1 is in host memory"):
        device_inputs([Producer(x), np.zeros(3)], None, 0)


def test_an_interface_object_is_read_as_it_says() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    (dense,) = device_inputs([OnDevice(x, stream=7)], None, 0)
    assert (dense.pointer, dense.shape, dense.strides) == (x.ctypes.data, (2, 3, 4), (12, 4, 1))
    assert (dense.dtype, dense.stream, dense.device_index) == ("float32", 7, None)
    # Explicit byte strides of a channels-last layout, for a blob compiled for that order.
    nhwc = np.zeros((2, 4, 5, 3), np.float32).transpose(0, 3, 1, 2)
    spec = InputSpec("float32", (None, 3, 4, 5), order=(0, 2, 3, 1))
    (array,) = device_inputs([OnDevice(nhwc, strides=nhwc.strides, shape=nhwc.shape)], [spec], 0)
    assert array.strides == (60, 1, 15, 3)
    assert not on_device(x) and on_device(OnDevice(x))


@pytest.mark.parametrize(
    ("inputs", "specs", "message"),
    [
        ([OnDevice(np.zeros(4, np.float32)), np.zeros(4, np.float32)], None,
         "input 1 is in host memory and another input on the GPU"),
        ([OnDevice(np.zeros((4, 4), np.float32), strides=(4, 16))], None,
         "input 0: device array with strides [1, 4] (elements) is not laid out densely"),
        ([OnDevice(np.zeros(4, np.float32), mask=object())], None,
         "input 0: masked device arrays are not supported"),
        ([OnDevice(np.zeros(4, np.complex64))], None, "input 0: unsupported dtype complex64"),
        ([OnDevice(np.zeros(4, ">f4"))], None, "big-endian device arrays are not supported"),
        ([OnDevice(np.zeros(4, np.float32), strides=(6,))], None,
         "input 0: strides (6,) are not whole elements"),
        ([type("Broken", (), {"__cuda_array_interface__": {"shape": (4,)}})()], None,
         "input 0: bad __cuda_array_interface__"),
        ([OnDevice(np.zeros((3, 8), np.int64))], [InputSpec("float32", (None, 8))],
         "input 0: expected dtype float32, got int64"),
        ([OnDevice(np.zeros((3, 7), np.float32))], [InputSpec("float32", (None, 8))],
         "input 0: expected shape [?, 8], got [3, 7]"),
    ],
)  # fmt: skip
def test_bad_device_inputs_are_refused_in_one_line(
    inputs: list[Any], specs: list[InputSpec] | None, message: str
) -> None:
    with pytest.raises(ShimkitError, match=None) as caught:
        device_inputs(inputs, specs, 0)
    assert message in str(caught.value)


def describe(dtype: str, shape: tuple[int, ...]) -> Tensor:
    desc = Tensor()
    desc.data, desc.ndim, desc.dtype = 0x7000, len(shape), DTYPE_CODES[dtype]
    for d, size in enumerate(shape):
        desc.sizes[d] = size
        desc.strides[d] = int(np.prod(shape[d + 1 :]))
    return desc


class Memory:
    """What the CUDA runtime does for a DeviceTensor, recorded: frees, and DLPack exports
    (a DLManagedTensor whose deleter records its address)."""

    def __init__(self) -> None:
        self.freed: list[int] = []
        self.exported: list[int] = []
        self.deleted: list[int] = []
        self.managed: list[DLManagedTensor] = []
        self.deleter = Deleter(self.deleted.append)

    def free_output(self, owner: int) -> None:
        self.freed.append(owner)

    def export_dlpack(self, owner: int) -> int:
        self.exported.append(owner)
        managed = DLManagedTensor(deleter=self.deleter)
        self.managed.append(managed)
        return ctypes.addressof(managed)


def test_an_output_frees_its_memory_once_when_it_is_gone() -> None:
    memory = Memory()
    freed = memory.freed
    out = DeviceTensor(describe("float16", (2, 3)), 42, 1, memory)
    face = out.__cuda_array_interface__
    assert face == {
        "shape": (2, 3), "typestr": "<f2", "data": (0x7000, False), "strides": (6, 2),
        "stream": None, "version": 3,
    }  # fmt: skip
    assert out.device == "cuda:1" and freed == []
    del out
    gc.collect()
    assert freed == [42]
    # bfloat16 has no type string in the interface: said, not mislabelled.
    with pytest.raises(TypeError, match="bfloat16"):
        _ = DeviceTensor(describe("bfloat16", (2,)), 43, 0, memory).__cuda_array_interface__
    # An unknown dtype is refused before the tensor takes the memory: the caller frees it.
    bad = describe("float32", (2,))
    bad.dtype = 99
    with pytest.raises(ShimkitError, match="dtype code 99"):
        DeviceTensor(bad, 44, 0, memory)
    gc.collect()
    assert 44 not in freed


# The capsule destructor runs where an exception cannot propagate: one it raised is an error.
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_an_output_exports_dlpack_capsules_freed_by_whoever_holds_them() -> None:
    memory = Memory()
    out = DeviceTensor(describe("float32", (2, 3)), 42, 1, memory)
    assert out.__dlpack_device__() == (2, 1)  # kDLCUDA, the model's GPU
    # What a consumer does (torch.from_dlpack): take the pointer, rename the capsule, and
    # call the deleter when its own tensor goes. The capsule's death then frees nothing.
    taken = out.__dlpack__(stream=1, max_version=(1, 0))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_SetName", ctypes.pythonapi)
    )
    pointer = get_pointer(taken, b"dltensor")
    assert pointer == ctypes.addressof(memory.managed[0])
    used_name = ctypes.c_char_p(b"used_dltensor")  # lives as long as the capsule
    set_name(taken, used_name)
    del taken
    gc.collect()
    assert memory.deleted == []
    # A capsule nobody took frees its tensor with itself (DLPack's rule).
    untaken = out.__dlpack__()
    del untaken
    gc.collect()
    assert memory.deleted == [ctypes.addressof(memory.managed[1])]
    assert memory.exported == [42, 42] and memory.freed == []  # exports hold handles of their own
    # Refused in one line: a copy, another device.
    with pytest.raises(BufferError, match="copy"):
        out.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="cuda:1"):
        out.__dlpack__(dl_device=(1, 0))
    assert len(memory.exported) == 2
    del out
    gc.collect()
    assert memory.freed == [42]
