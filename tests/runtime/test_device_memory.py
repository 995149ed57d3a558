"""shimkit.runtime.device_memory without a GPU: how inputs in GPU memory are read from their
`__cuda_array_interface__`, the checks that refuse them in one line, and who frees an output.
The runs themselves: tests/cuda/test_cuda_device_memory.py."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from shimkit.errors import ShimkitError
from shimkit.runtime.blob import InputSpec
from shimkit.runtime.capi import DTYPE_CODES, Tensor
from shimkit.runtime.device_memory import DeviceTensor, device_inputs, on_device


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


def test_an_output_frees_its_memory_once_when_it_is_gone() -> None:
    freed: list[int] = []
    out = DeviceTensor(describe("float16", (2, 3)), 42, 1, freed.append)
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
        _ = DeviceTensor(describe("bfloat16", (2,)), 43, 0, freed.append).__cuda_array_interface__
    # An unknown dtype is refused before the tensor takes the memory: the caller frees it.
    bad = describe("float32", (2,))
    bad.dtype = 99
    with pytest.raises(ShimkitError, match="dtype code 99"):
        DeviceTensor(bad, 44, 0, freed.append)
    gc.collect()
    assert 44 not in freed
