"""Boolean-mask and cross-device indexing in integer form (shimkit.aot.indexing): masks of
one or more dims, in front or after a slice, beside an integer index, empty selections,
against eager exactly; integer indexing left alone; index tensors made on the CPU for a
tensor on another device moved there (the meta device stands in for CUDA); and a
detection-style filter compiled for the slim CPU runtime (control: without the form the
blob imports ATen's index, which the slim CPU shims lack, and compile names it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shimkit.aot.indexing import masks_in_integer_form

from tests.aot.math_form_run import calls_of, compile_and_run

torch = pytest.importorskip("torch")


class Masks(torch.nn.Module):
    def forward(self, x: Any, rows: Any, cols: Any) -> tuple[Any, ...]:
        return (
            x[x > 0],  # a mask of every dim
            x[rows],  # a mask of the first dim: whole rows
            x[:, cols],  # after a slice
            x[rows, 1],  # beside an integer
            x.unsqueeze(0)[:, rows],
        )


def _inputs(seed: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 4, generator=g)
    rows = torch.rand(5, generator=g) > 0.5
    cols = torch.rand(4, generator=g) > 0.5
    return x, rows, cols


def test_masks_give_what_eager_gives() -> None:
    exported = torch.export.export(Masks(), _inputs(0))
    program, count = masks_in_integer_form(torch, exported)
    assert count == 5
    for seed in range(4):
        inputs = _inputs(seed)
        for got, want in zip(program.module()(*inputs), Masks()(*inputs), strict=True):
            assert torch.equal(got, want)
    x, rows, cols = _inputs(0)
    empty = (x, torch.zeros_like(rows), torch.zeros_like(cols))  # nothing selected
    for got, want in zip(program.module()(*empty), Masks()(*empty), strict=True):
        assert got.shape == want.shape and torch.equal(got, want)


def test_integer_indexing_is_left_alone() -> None:
    class Integers(torch.nn.Module):
        def forward(self, x: Any, idx: Any) -> tuple[Any, ...]:
            return x[:, idx], x[torch.arange(x.shape[0]), idx[:5]]

    exported = torch.export.export(Integers(), (torch.randn(5, 6), torch.tensor([0, 2, 5, 1, 3])))
    assert masks_in_integer_form(torch, exported) == (exported, 0)


def test_indices_made_on_the_cpu_move_to_the_tensors_device() -> None:
    class Pairs(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x[torch.arange(3), torch.tensor([0, 2, 1])]  # CPU indices, eager allows

    exported = torch.export.export(Pairs(), (torch.randn(3, 4, device="meta"),))
    program, count = masks_in_integer_form(torch, exported)
    assert count == 1
    [index] = [n for n in program.graph.nodes if str(n.target) == "aten.index.Tensor"]
    assert {str(i.meta["val"].device) for i in index.args[1]} == {"meta"}
    # Control: as exported, the indices are on the CPU.
    [before] = [n for n in exported.graph.nodes if str(n.target) == "aten.index.Tensor"]
    assert {str(i.meta["val"].device) for i in before.args[1]} == {"cpu"}


class Filter(torch.nn.Module):
    """Detection-style post-processing: the boxes and labels whose score passes a threshold."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = torch.nn.Linear(16, 6)

    def forward(self, features: Any) -> tuple[Any, Any]:
        out = self.head(features)  # [anchors, 4 box + score + label logit]
        keep = out[:, 4].sigmoid() > 0.5
        return out[keep, :4], out[:, 5][keep].round()


@pytest.mark.slow
def test_filter_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    from shimkit.aot.compile import in_math_form
    from shimkit.errors import ShimkitError

    features = torch.randn(40, 16, generator=torch.Generator().manual_seed(1))
    exported = torch.export.export(Filter(), (features,))
    assert len(calls_of(exported, ("aten.index.Tensor",))) == 2
    program, notes = in_math_form(torch, exported, False, False)
    assert any("2 boolean-mask or cross-device index call(s)" in n for n in notes), notes
    run = compile_and_run(program, (features,), tmp_path / "filter.pt2", notes)
    assert not any("index_Tensor" in name for name in run.imports)
    with torch.no_grad():
        want = [t.numpy() for t in Filter()(features)]
    for got, expected in zip(run.outputs, want, strict=True):
        assert got.shape == expected.shape and np.allclose(got, expected, rtol=1e-5, atol=1e-6)
    # Control: the program as exported imports ATen's index, which compile refuses.
    plain, _ = in_math_form(torch, exported, False, False, slim=False)
    with pytest.raises(ShimkitError, match="index_Tensor"):
        compile_and_run(plain, (features,), tmp_path / "plain.pt2")
