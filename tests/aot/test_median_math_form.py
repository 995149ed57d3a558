"""Medians along a dim in their math form (shimkit.aot.median).

No torch has a C shim for `aten.median.dim` or `aten.nanmedian.dim`, so a model with
`x.median(dim)` compiled into a blob that needs libtorch's proxy executor. Compile now
rewrites each call into a stable sort and a gather. Here: values and indices against torch
on the CPU (NaN, all-NaN slices, ties in integers and floats, keepdim, other dims, long
slices), the rewrite leaves no median call (control: as exported there are), a dynamic
batch is rewritten, an op torch has a shim for is left alone, and a compiled model runs on
the slim CPU runtime next to eager (control: without the rewrite, compile refuses it,
naming the op).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
NAN = float("nan")


class Medians(torch.nn.Module):
    def __init__(self, dim: int, keepdim: bool) -> None:
        super().__init__()
        self.dim, self.keepdim = dim, keepdim

    def forward(self, x: Any) -> Any:
        v, i = x.median(self.dim, self.keepdim)
        w, j = x.nanmedian(self.dim, self.keepdim)
        return v, i, w, j


def median_calls(exported: Any) -> list[str]:
    return [
        str(n.target)
        for n in exported.graph.nodes
        if n.op == "call_function" and "median" in str(n.target)
    ]


def assert_same(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert torch.equal(g.nan_to_num(-1), w.nan_to_num(-1)), (g, w)
        assert torch.equal(torch.isnan(g), torch.isnan(w)), (g, w)


def with_nans_and_ties(shape: tuple[int, ...], seed: int) -> Any:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4, shape, generator=generator).to(torch.float64)
    x[torch.rand(shape, generator=generator) < 0.15] = NAN
    return x


@pytest.mark.parametrize(
    "shape,dim,keepdim",
    [((5, 7), 1, False), ((6, 4, 9), 0, True), ((3, 4, 33), -1, False), ((2, 1000), 1, True)],
)
def test_math_form_matches_torch(shape: tuple[int, ...], dim: int, keepdim: bool) -> None:
    from shimkit.aot.median import median_in_math_form

    x = with_nans_and_ties(shape, seed=len(shape) * 10 + dim)
    model = Medians(dim, keepdim).eval()
    exported = torch.export.export(model, (x,))
    assert median_calls(exported) == ["aten.median.dim", "aten.nanmedian.dim"]  # control
    rewritten, count = median_in_math_form(torch, exported, only_without_shim=False)
    assert count == 2 and median_calls(rewritten) == []
    for seed in range(4):
        y = with_nans_and_ties(shape, seed)
        assert_same(rewritten.module()(y), model(y))
    # Slices of NaN only: NaN, at the first NaN for median; nanmedian's index there is what
    # ATen's selection happens to leave (7 NaNs: index 5), so only its value is compared.
    all_nan = torch.full(shape, NAN, dtype=torch.float64)
    got, want = rewritten.module()(all_nan), model(all_nan)
    assert_same(got[:3], want[:3])


def test_integers_and_dynamic_batch() -> None:
    from shimkit.aot.median import median_in_math_form

    class IntMedian(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x.median(1)

    x = torch.randint(0, 3, (4, 11))
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(IntMedian(), (x,), dynamic_shapes=({0: batch},))
    rewritten, count = median_in_math_form(torch, exported, only_without_shim=False)
    assert count == 1
    for rows in (1, 4, 9):
        y = torch.randint(0, 3, (rows, 11))
        assert_same(tuple(rewritten.module()(y)), tuple(IntMedian()(y)))


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import median

    exported = torch.export.export(Medians(1, False).eval(), (torch.randn(3, 5),))
    monkeypatch.setattr(median, "torch_has_c_shim", lambda name: True)
    same, count = median.median_in_math_form(torch, exported)
    assert count == 0 and same is exported
    monkeypatch.setattr(median, "torch_has_c_shim", lambda name: False)
    rewritten, count = median.median_in_math_form(torch, exported)
    assert count == 2 and median_calls(rewritten) == []


class RobustPool(torch.nn.Module):
    """Median pooling over time of a projection: robust to outlier frames."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(6, 5)

    def forward(self, x: Any) -> Any:
        h = self.proj(x)  # [batch, time, 5]
        values, frames = h.median(dim=1)
        return values, frames, h.nanmedian(dim=2).values


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from shimkit.aot import median
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_in_math_form_and_run

    torch.manual_seed(12)
    model = RobustPool().eval()
    inputs = (torch.randn(3, 9, 6),)
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "pool.pt2")
    assert run.notes == [
        "2 median/nanmedian call(s) along a dim compiled in their math form (a stable sort; "
        "this torch has no C shim for them)"
    ]
    assert not any("proxy_executor" in name for name in run.imports)
    with torch.no_grad():
        want = model(*inputs)
    for got, w in zip(run.outputs, want, strict=True):
        assert (
            np.allclose(got, w.numpy(), rtol=1e-5, atol=1e-6)
            if got.dtype.kind == "f"
            else (np.array_equal(got, w.numpy()))
        )
    # Control: without the rewrite the blob needs libtorch's proxy executor, and compile
    # refuses it, naming the op.
    monkeypatch.setattr(median, "torch_has_c_shim", lambda name: True)
    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    assert notes == []
    with pytest.raises(ShimkitError, match=r"median\.dim"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
