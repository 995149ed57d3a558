"""The slim CPU order statistics, called directly, against ATen: kthvalue and mode along a
dimension, median and nanmedian of a whole tensor.

Inductor has no kernel of its own for these and calls the fallbacks. Each case compares
values, indices (where ATen's are defined: ties and NaN), sizes, strides and dtypes; bad
arguments fail with a message.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from tests.runtime.shimcall import TorchShims, outs


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def call(sh: TorchShims, name: str, x: torch.Tensor, *args: Any, results: int) -> list[Any]:
    handles = outs(results)
    rc = sh.call(f"aoti_torch_cpu_{name}", sh.tensor(x), *args, *[ctypes.byref(h) for h in handles])
    assert rc == 0, sh.error()
    return [sh.torch(h) for h in handles]


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert got.stride() == want.stride(), "memory format differs from ATen's"
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def rows_with_ties() -> torch.Tensor:
    """Rows with repeated values (ties) and one with a NaN."""
    torch.manual_seed(11)
    x = torch.randint(0, 4, (5, 9)).float()
    x[3, 2] = float("nan")
    return x


@pytest.mark.parametrize("k", [1, 3, 9])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_matches_aten(sh: TorchShims, k: int, dim: int, keepdim: bool) -> None:
    """Values and indices, ties included: the k-th in a stable ascending order (NaN last)."""
    x = rows_with_ties()
    if dim == 0:
        x = x.t()  # a transposed input: strided slices
    k = min(k, x.shape[dim])
    values, indices = call(
        sh, "kthvalue", x, ctypes.c_int64(k), ctypes.c_int64(dim), ctypes.c_int32(keepdim),
        results=2,
    )  # fmt: skip
    want = torch.kthvalue(x, k, dim, keepdim)
    assert_same(values, want.values)
    assert_same(indices, want.indices)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float64, torch.float16])
def test_kthvalue_other_dtypes_and_a_scalar(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(12)
    x = torch.randperm(24).reshape(4, 6).to(dtype)
    values, indices = call(
        sh, "kthvalue", x, ctypes.c_int64(2), ctypes.c_int64(1), ctypes.c_int32(0), results=2
    )
    want = torch.kthvalue(x, 2, 1)
    assert_same(values, want.values)
    assert_same(indices, want.indices)
    scalar = torch.tensor(5, dtype=dtype)
    values, indices = call(
        sh, "kthvalue", scalar, ctypes.c_int64(1), ctypes.c_int64(0), ctypes.c_int32(0), results=2
    )
    assert_same(values, torch.kthvalue(scalar, 1).values)
    assert_same(indices, torch.kthvalue(scalar, 1).indices)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_matches_aten(sh: TorchShims, dim: int, keepdim: bool) -> None:
    """The most frequent value (the smallest of equally frequent ones) and the position of
    its last occurrence."""
    x = rows_with_ties()
    x[3, 2] = 1.0  # NaN modes: ATen's index among NaNs is its sort's, not defined here
    values, indices = call(
        sh, "mode", x, ctypes.c_int64(dim), ctypes.c_int32(keepdim), results=2
    )  # fmt: skip
    want = torch.mode(x, dim, keepdim)
    assert_same(values, want.values)
    assert_same(indices, want.indices)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.bfloat16])
def test_mode_other_dtypes(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(13)
    x = torch.randint(0, 3, (4, 7)).to(dtype)
    values, indices = call(sh, "mode", x, ctypes.c_int64(1), ctypes.c_int32(0), results=2)
    want = torch.mode(x, 1)
    assert_same(values, want.values)
    assert_same(indices, want.indices)


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([[3.0, 1.0, 4.0], [1.0, 5.0, 9.0]]),  # 6 values: the lower median
        torch.tensor([2.0, float("nan"), 1.0]),  # NaN: median NaN, nanmedian of the rest
        torch.tensor([float("nan"), float("nan")]),  # only NaN: both NaN
        torch.tensor([]),  # empty: NaN
        torch.arange(12, dtype=torch.int64).reshape(3, 4).t(),  # integers, strided
    ],
    ids=["even-count", "with-nan", "only-nan", "empty", "int64-strided"],
)
@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_whole_tensor_medians_match_aten(sh: TorchShims, x: torch.Tensor, op: str) -> None:
    [got] = call(sh, op, x, results=1)
    assert_same(got, getattr(torch, op)(x))


def test_order_statistics_refuse_bad_arguments(sh: TorchShims) -> None:
    x = torch.randn(3, 4)
    [values, indices] = outs(2)
    for k in (0, 5):
        rc = sh.call(
            "aoti_torch_cpu_kthvalue", sh.tensor(x), ctypes.c_int64(k), ctypes.c_int64(1),
            ctypes.c_int32(0), ctypes.byref(values), ctypes.byref(indices),
        )  # fmt: skip
        assert rc != 0 and f"kthvalue: k {k} out of range" in sh.error()
    rc = sh.call(
        "aoti_torch_cpu_mode", sh.tensor(torch.randn(3, 0)), ctypes.c_int64(1), ctypes.c_int32(0),
        ctypes.byref(values), ctypes.byref(indices),
    )  # fmt: skip
    assert rc != 0 and "mode: the dimension is empty" in sh.error()
    rc = sh.call(
        "aoti_torch_cpu_kthvalue", sh.tensor(x), ctypes.c_int64(1), ctypes.c_int64(2),
        ctypes.c_int32(0), ctypes.byref(values), ctypes.byref(indices),
    )  # fmt: skip
    assert rc != 0 and "dimension 2 out of range" in sh.error()
    [median] = outs(1)
    empty = torch.tensor([], dtype=torch.int64)
    assert sh.call("aoti_torch_cpu_median", sh.tensor(empty), ctypes.byref(median)) != 0
    assert "median of an empty integer tensor" in sh.error()
