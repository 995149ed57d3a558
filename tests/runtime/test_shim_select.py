"""Selections sized by the data (nonzero, masked_select), running extremes (cummax,
cummin) and pairwise distances (cdist) of the slim CPU shims, called directly, against
ATen: values, indices, sizes, strides and dtypes, NaN and ties included; bad arguments fail
with a message."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from tests.runtime.shimcall import Handle, TorchShims, outs


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def mixed_values() -> torch.Tensor:
    x = torch.tensor([[0.0, 1.5, -2.0, 0.0], [float("nan"), 0.0, 3.0, -0.0], [2.0, 2.0, 0.0, 1.0]])
    return x


@pytest.mark.parametrize(
    "x",
    [
        mixed_values(),
        mixed_values().t(),  # strided
        mixed_values() > 0.5,  # bool
        torch.tensor([[3, 0, 0], [0, -1, 7]], dtype=torch.int64),
        mixed_values().to(torch.bfloat16),
        torch.zeros(2, 0, 3),
        torch.tensor(2.0),  # 0-D: [1, 0]
        torch.tensor(0),  # 0-D: [0, 0]
        torch.arange(24.0).reshape(2, 3, 4) % 5,
    ],
    ids=["float", "strided", "bool", "int64", "bfloat16", "empty", "scalar", "zero", "3d"],
)
def test_nonzero_matches_aten(sh: TorchShims, x: torch.Tensor) -> None:
    [out] = outs(1)
    sh.ok("aoti_torch_cpu_nonzero", sh.tensor(x), ctypes.byref(out))
    assert_same(sh.torch(out), torch.nonzero(x))


@pytest.mark.parametrize(
    ("x", "mask"),
    [
        (mixed_values(), mixed_values() > 0),
        (mixed_values(), torch.tensor([True, False, True, True])),  # mask broadcast over rows
        (
            torch.tensor([[5], [6], [7]]),
            torch.tensor([[True, False], [False, False], [True, True]]),
        ),
        (mixed_values().t(), mixed_values().t() != 0),  # strided
        (mixed_values().to(torch.float16), torch.zeros(3, 4, dtype=torch.bool)),  # none kept
    ],
    ids=["same-shape", "mask-broadcast", "self-broadcast", "strided", "none"],
)
def test_masked_select_matches_aten(sh: TorchShims, x: torch.Tensor, mask: torch.Tensor) -> None:
    [out] = outs(1)
    sh.ok("aoti_torch_cpu_masked_select", sh.tensor(x), sh.tensor(mask), ctypes.byref(out))
    assert_same(sh.torch(out), torch.masked_select(x, mask))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.ones(3, 4, dtype=torch.uint8), "mask must be bool"),
        (torch.ones(3, 5, dtype=torch.bool), "do not broadcast"),
    ],
)
def test_masked_select_refuses_bad_masks(sh: TorchShims, mask: torch.Tensor, message: str) -> None:
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu_masked_select",
        sh.tensor(torch.randn(3, 4)),
        sh.tensor(mask),
        ctypes.byref(out),
    )
    assert rc != 0 and message in sh.error()


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize(
    "x",
    [
        mixed_values(),  # NaN, ties, signed zeros
        mixed_values().t(),
        torch.tensor([[3, 1, 3, 0], [1, 1, 2, 2], [0, 5, 5, 4]], dtype=torch.int64),
        mixed_values().to(torch.bfloat16),
        mixed_values() > 0,
    ],
    ids=["float", "strided", "int64", "bfloat16", "bool"],
)
def test_running_extremes_match_aten(sh: TorchShims, op: str, dim: int, x: torch.Tensor) -> None:
    values, indices = outs(2)
    sh.ok(
        f"aoti_torch_cpu_{op}",
        sh.tensor(x),
        ctypes.c_int64(dim),
        *map(ctypes.byref, (values, indices)),
    )
    want = getattr(torch, op)(x, dim)
    assert_same(sh.torch(values), want.values)
    assert_same(sh.torch(indices), want.indices)


def test_running_extreme_of_a_scalar_and_a_bad_dim(sh: TorchShims) -> None:
    values, indices = outs(2)
    x = torch.tensor(4.0)
    sh.ok(
        "aoti_torch_cpu_cummax",
        sh.tensor(x),
        ctypes.c_int64(0),
        *map(ctypes.byref, (values, indices)),
    )
    assert_same(sh.torch(values), torch.cummax(x, 0).values)
    assert_same(sh.torch(indices), torch.cummax(x, 0).indices)
    rc = sh.call(
        "aoti_torch_cpu_cummin", sh.tensor(torch.randn(2, 3)), ctypes.c_int64(2),
        *map(ctypes.byref, (values, indices)),
    )  # fmt: skip
    assert rc != 0 and "dim" in sh.error().lower()


def cdist(
    sh: TorchShims, x1: torch.Tensor, x2: torch.Tensor, p: float, mode: int | None
) -> tuple[int, Handle]:
    [out] = outs(1)
    mode_arg = ctypes.byref(ctypes.c_int64(mode)) if mode is not None else None
    rc = sh.call(
        "aoti_torch_cpu__cdist_forward",
        sh.tensor(x1),
        sh.tensor(x2),
        ctypes.c_double(p),
        mode_arg,
        ctypes.byref(out),
    )
    return rc, out


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, float("inf")])
@pytest.mark.parametrize(
    ("shape1", "shape2", "mode"),
    [
        ((5, 8), (7, 8), None),  # direct
        ((30, 8), (7, 8), None),  # p = 2 from dot products (more than 25 rows)
        ((5, 8), (7, 8), 1),  # always dot products
        ((30, 8), (40, 8), 2),  # never
        ((2, 1, 5, 4), (3, 6, 4), None),  # batch dimensions broadcast
    ],
)
def test_cdist_matches_aten(
    sh: TorchShims, p: float, shape1: tuple[int, ...], shape2: tuple[int, ...], mode: int | None
) -> None:
    torch.manual_seed(6)
    x1, x2 = torch.randn(shape1), torch.randn(shape2)
    if x1.dim() == 2:
        x1[0] = x2[0]  # a zero distance
    rc, out = cdist(sh, x1, x2, p, mode)
    assert rc == 0, sh.error()
    got = sh.torch(out)
    want = torch.ops.aten._cdist_forward(x1, x2, p, mode)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_cdist_refuses_bad_arguments(sh: TorchShims) -> None:
    x = torch.randn(3, 4)
    assert cdist(sh, x, torch.randn(3, 5), 2.0, None)[0] != 0 and "last dimension" in sh.error()
    assert cdist(sh, x, x, -1.0, None)[0] != 0 and "non-negative" in sh.error()
    assert cdist(sh, x, x, 2.0, 3)[0] != 0 and "compute_mode" in sh.error()
    assert cdist(sh, x.long(), x.long(), 2.0, None)[0] != 0 and "float32 and float64" in sh.error()


def pdist(sh: TorchShims, x: torch.Tensor, p: float) -> tuple[int, Handle]:
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu__pdist_forward", sh.tensor(x), ctypes.c_double(p), ctypes.byref(out)
    )
    return rc, out


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, float("inf")])
@pytest.mark.parametrize("shape", [(6, 4), (30, 8), (1, 3), (5, 0)], ids=str)
def test_pdist_matches_aten(sh: TorchShims, p: float, shape: tuple[int, int]) -> None:
    """Rows i < j in row-major order, computed directly for every p (no dot products, as
    ATen's pdist kernel); one row gives no distance, no columns all zeros."""
    torch.manual_seed(7)
    x = torch.randn(shape, dtype=torch.float64 if shape[0] == 30 else torch.float32)
    if shape[0] > 2:
        x[2] = x[0]  # a zero distance
    # The (6, 4) input column-major: rows read with a stride.
    rc, out = pdist(sh, x.t().contiguous().t() if shape == (6, 4) else x, p)
    assert rc == 0, sh.error()
    got, want = sh.torch(out), torch.ops.aten._pdist_forward(x, p)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_pdist_refuses_bad_arguments(sh: TorchShims) -> None:
    assert pdist(sh, torch.randn(2, 3, 4), 2.0)[0] != 0 and "2-D input" in sh.error()
    assert pdist(sh, torch.randn(3, 4), -1.0)[0] != 0 and "non-negative" in sh.error()
    assert pdist(sh, torch.ones(3, 4, dtype=torch.int64), 2.0)[0] != 0
    assert "float32 and float64" in sh.error()
