"""histc and grid_sampler_3d of the slim CPU shims, called directly, against ATen: counts
(elements on bin edges, outside the range, NaN, the data's own range), and volumetric
sampling in every interpolation and padding mode, bit for bit; bad arguments fail with a
message."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from tests.runtime.shimcall import Handle, TorchShims, outs


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def histc(sh: TorchShims, x: torch.Tensor, bins: int, lo: float, hi: float) -> tuple[int, Handle]:
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu_histc", sh.tensor(x), ctypes.c_int64(bins), ctypes.c_double(lo),
        ctypes.c_double(hi), ctypes.byref(out),
    )  # fmt: skip
    return rc, out


def histc_inputs() -> dict[str, tuple[torch.Tensor, int, float, float]]:
    torch.manual_seed(3)
    on_edges = torch.arange(0.0, 10.5, 0.5)  # every edge of 5 and 10 bins over [0, 10]
    with_nan = torch.tensor([0.1, float("nan"), 0.9, 1.0, -0.5, 2.0, 0.5])
    return {
        "random": (torch.randn(1000), 7, -2.0, 2.0),
        "on_edges": (on_edges, 5, 0.0, 10.0),
        "on_edges_10": (on_edges, 10, 0.0, 10.0),
        "thirds": (torch.linspace(-1, 1, 301), 3, -1.0, 1.0),  # edges that float32 rounds
        "outside_and_nan": (with_nan, 4, 0.0, 1.0),
        "data_range": (torch.randn(4, 50) * 3 + 1, 16, 0.0, 0.0),  # min == max: the data's
        "constant": (torch.full((9,), 2.5), 3, 0.0, 0.0),  # [1.5, 3.5]
        "strided_float64": (torch.randn(40, 30, dtype=torch.float64).t()[::2], 11, -1.5, 1.0),
        "empty": (torch.zeros(0), 4, 0.0, 0.0),  # [-1, 1], no counts
    }


@pytest.mark.parametrize("case", list(histc_inputs()))
def test_histc_matches_aten(sh: TorchShims, case: str) -> None:
    x, bins, lo, hi = histc_inputs()[case]
    rc, out = histc(sh, x, bins, lo, hi)
    assert rc == 0, sh.error()
    got, want = sh.torch(out), torch.histc(x, bins=bins, min=lo, max=hi)
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got, want), (got, want)


def test_histc_edge_cases_decide_counts() -> None:
    """Control: the edge cases change counts (a plain floor((v - lo) / width), which drops max
    itself, differs from ATen's), so the comparison above can fail."""
    x, bins, lo, hi = histc_inputs()["on_edges"]
    naive = torch.bincount(((x - lo) / ((hi - lo) / bins)).floor().long(), minlength=bins + 1)
    assert not torch.equal(naive[:bins].float(), torch.histc(x, bins=bins, min=lo, max=hi))


def test_histc_refuses_bad_arguments(sh: TorchShims) -> None:
    x = torch.randn(8)
    assert histc(sh, x, 0, 0.0, 1.0)[0] != 0 and "bins must be > 0" in sh.error()
    assert histc(sh, x, 4, 1.0, 0.0)[0] != 0 and "max must be larger than min" in sh.error()
    assert histc(sh, x, 4, 0.0, float("inf"))[0] != 0 and "not finite" in sh.error()
    nan_data = torch.tensor([1.0, float("nan")])
    assert histc(sh, nan_data, 4, 0.0, 0.0)[0] != 0 and "not finite" in sh.error()
    assert histc(sh, x.long(), 4, 0.0, 1.0)[0] != 0 and "float32 and float64" in sh.error()


def grid_sampler_3d(
    sh: TorchShims, x: torch.Tensor, grid: torch.Tensor, mode: int, padding: int, align: bool
) -> tuple[int, Handle]:
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu_grid_sampler_3d", sh.tensor(x), sh.tensor(grid), ctypes.c_int64(mode),
        ctypes.c_int64(padding), ctypes.c_int32(int(align)), ctypes.byref(out),
    )  # fmt: skip
    return rc, out


def sample_grid(dtype: torch.dtype) -> torch.Tensor:
    """[2, 3, 4, 5, 3] coordinates reaching past [-1, 1] (padding decides those), with exact
    voxel centres, the corners and a non-finite value among them."""
    torch.manual_seed(11)
    grid = torch.rand(2, 3, 4, 5, 3, dtype=dtype) * 2.6 - 1.3
    grid[0, 0, 0, 0] = torch.tensor([-1.0, -1.0, -1.0])
    grid[0, 0, 0, 1] = torch.tensor([1.0, 1.0, 1.0])
    grid[0, 0, 0, 2] = torch.tensor([0.0, 0.5, -0.5])
    grid[1, 2, 3, 4] = torch.tensor([float("inf"), 0.0, 0.0])
    return grid


@pytest.mark.parametrize("align", [False, True], ids=["edges", "align_corners"])
@pytest.mark.parametrize("padding", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", [0, 1], ids=["trilinear", "nearest"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_grid_sampler_3d_matches_aten(
    sh: TorchShims, mode: int, padding: int, align: bool, dtype: torch.dtype
) -> None:
    x = torch.randn(2, 3, 4, 5, 6, dtype=dtype)
    grid = sample_grid(dtype)
    if dtype == torch.float64:
        x = x.permute(0, 1, 4, 3, 2).contiguous().permute(0, 1, 4, 3, 2)  # strided input
    rc, out = grid_sampler_3d(sh, x, grid, mode, padding, align)
    assert rc == 0, sh.error()
    got = sh.torch(out)
    want = torch.grid_sampler_3d(x, grid, mode, padding, align)
    assert got.shape == want.shape and got.stride() == want.stride() and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_grid_sampler_3d_modes_give_different_results(sh: TorchShims) -> None:
    """Control: each mode and padding changes the answer, so the comparison above can fail."""
    x, grid = torch.randn(2, 3, 4, 5, 6), sample_grid(torch.float32)
    results = {}
    for mode, padding, align in [(0, 0, False), (1, 0, False), (0, 1, False), (0, 2, False),
                                 (0, 0, True)]:  # fmt: skip
        rc, out = grid_sampler_3d(sh, x, grid, mode, padding, align)
        assert rc == 0, sh.error()
        results[(mode, padding, align)] = sh.torch(out)
    values = list(results.values())
    assert all(not torch.equal(a, b) for i, a in enumerate(values) for b in values[i + 1 :])


def test_grid_sampler_3d_refuses_bad_arguments(sh: TorchShims) -> None:
    x, grid = torch.randn(1, 2, 3, 3, 3), torch.zeros(1, 2, 2, 2, 3)
    assert grid_sampler_3d(sh, x, grid[..., :2], 0, 0, False)[0] != 0 and "(x, y, z)" in sh.error()
    assert grid_sampler_3d(sh, x, grid, 2, 0, False)[0] != 0 and "bicubic" in sh.error()
    assert grid_sampler_3d(sh, x, grid, 0, 3, False)[0] != 0 and "padding mode" in sh.error()
    assert grid_sampler_3d(sh, x, grid.double(), 0, 0, False)[0] != 0 and "both" in sh.error()
    assert grid_sampler_3d(sh, x[0], grid, 0, 0, False)[0] != 0 and "5-D" in sh.error()
    two = torch.zeros(2, 2, 2, 2, 3)
    assert grid_sampler_3d(sh, x, two, 0, 0, False)[0] != 0 and "batch" in sh.error()
