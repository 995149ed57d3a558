"""The `aoti_torch_item_*` shims (shim_core.cpp): a one-element tensor's value, read on the
host and converted as torch's `Tensor.item<T>()` converts it. A program calls them where it
reads a size from its data (torch.bincount's length, a `.item()` in the model). Here: every
dtype into every item type, 0-d and [1, 1] tensors, float16/bfloat16 as their bits; a
tensor of more than one element, a value an integer type cannot hold, and a NaN into an
integer fail with a message (controls)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
import torch

from tests.runtime.shimcall import TorchShims

ITEM_TYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "bool": ctypes.c_bool,
    "float16": ctypes.c_uint16,  # its bits
    "bfloat16": ctypes.c_uint16,
}


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def item(sh: TorchShims, t: torch.Tensor, kind: str) -> tuple[int, Any]:
    value = ITEM_TYPES[kind]()
    rc = sh.call(f"aoti_torch_item_{kind}", sh.tensor(t), ctypes.byref(value))
    return rc, value.value


def as_torch_would(t: torch.Tensor, kind: str) -> Any:
    """torch's own answer: `t.item()` converted to the item type (float16/bfloat16: bits)."""
    if kind in ("float16", "bfloat16"):
        bits = t.to(getattr(torch, kind)).view(torch.int16).item()
        return bits & 0xFFFF
    return getattr(np, kind if kind != "bool" else "bool_")(t.item()).item()


@pytest.mark.parametrize(
    "dtype",
    [
        torch.int64,
        torch.int32,
        torch.uint8,
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.bool,
    ],
)
@pytest.mark.parametrize("shape", [(), (1, 1)])
def test_every_dtype_into_every_item_type(sh: TorchShims, dtype: Any, shape: tuple) -> None:
    value = torch.tensor(True if dtype == torch.bool else 7.5).to(dtype).reshape(shape)
    for kind in ITEM_TYPES:
        rc, got = item(sh, value, kind)
        assert rc == 0, (kind, sh.error())
        assert got == as_torch_would(value, kind), (dtype, kind)


def test_large_int64_and_negative_values_are_exact(sh: TorchShims) -> None:
    big = torch.tensor(2**62 + 1, dtype=torch.int64)
    assert item(sh, big, "int64") == (0, 2**62 + 1)
    assert item(sh, torch.tensor(-3, dtype=torch.int64), "int8") == (0, -3)
    assert item(sh, torch.tensor(-2.75, dtype=torch.float64), "int32") == (0, -2)


@pytest.mark.parametrize(
    "t,kind,message",
    [
        (torch.zeros(2), "int64", "tensor of 2 elements"),
        (torch.tensor(300), "uint8", "does not fit"),
        (torch.tensor(-1), "uint64", "does not fit"),
        (torch.tensor(float("nan")), "int64", "does not fit"),
    ],
)
def test_what_has_no_item_fails_with_a_message(
    sh: TorchShims, t: torch.Tensor, kind: str, message: str
) -> None:
    rc, _ = item(sh, t, kind)
    assert rc != 0 and message in sh.error() and "aoti_torch_item_" in sh.error()
