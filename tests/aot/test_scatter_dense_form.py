"""Scatter and index reductions as dense comparisons (shimkit.aot.scatter).

The slim CUDA shims run scatter_reduce (amax, amin, prod, mean) and index_reduce on the host;
compile rewrites them for slim CUDA blobs into reductions Inductor generates. Here, on the
CPU (the form is device-neutral): every reduction with and without the input, along each
dim, an index smaller than the input and a source larger than the index, repeated and
missing positions, NaN, index_reduce, the zoo's index-ops model, against torch; the rewrite
leaves neither op (control: as exported they are there), and a wrong form (include_self
ignored) fails the same comparison (control). Left alone: sum scatters (Inductor's own),
integer tensors, masks over the size limit, dynamic sizes, and every call unless
`in_math_form` is asked for the slim CUDA target. A rewritten program compiles and runs on
the slim CPU runtime without the reductions' shims. Boolean scatters (a top-p mask put back
in vocabulary order) done on bytes, and int64 scatters as positions and a gather (a sort's
ranks), match torch exactly, also from a source larger than the index and with an index
narrower than the input along another dim, and of a dynamic batch the tensors share (at
several batch sizes); an int64 scatter whose index may outgrow its source (two independent
dynamic sizes) keeps its call, and a call given by keyword is checked as one given by
position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")

REDUCTIONS = ("amax", "amin", "prod", "mean")


class ScatterReduce(torch.nn.Module):
    def __init__(self, dim: int, reduce: str, include_self: bool) -> None:
        super().__init__()
        self.dim, self.reduce, self.include_self = dim, reduce, include_self

    def forward(self, x: Any, index: Any, src: Any) -> Any:
        return x.scatter_reduce(
            self.dim, index, src, reduce=self.reduce, include_self=self.include_self
        )


class IndexReduce(torch.nn.Module):
    def __init__(self, dim: int, reduce: str, include_self: bool) -> None:
        super().__init__()
        self.dim, self.reduce, self.include_self = dim, reduce, include_self

    def forward(self, x: Any, index: Any, source: Any) -> Any:
        return x.index_reduce(self.dim, index, source, self.reduce, include_self=self.include_self)


def reduction_calls(program: Any) -> list[str]:
    return calls_of(program, ("aten.scatter_reduce.two", "aten.index_reduce.default"))


def rewritten(model: Any, *inputs: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.scatter import scatter_reductions_in_dense_form

    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert reduction_calls(exported)  # control: as exported, the call is there
    return scatter_reductions_in_dense_form(torch, exported)


def scatter_operands(dim: int, seed: int) -> tuple[Any, Any, Any]:
    """x [4, 6]; an index [3, 4] (smaller than x off `dim`, repeats and gaps along it);
    a source [5, 5], larger than the index."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 6, generator=generator)
    index = torch.randint(0, x.shape[dim], (3, 4), generator=generator)
    return x, index, torch.randn(5, 5, generator=generator)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_reduce_matches_torch(reduce: str, include_self: bool, dim: int) -> None:
    model = ScatterReduce(dim, reduce, include_self)
    program, count = rewritten(model, *scatter_operands(dim, 0))
    assert count == 1 and reduction_calls(program) == []
    for seed in range(4):
        inputs = scatter_operands(dim, seed)
        torch.testing.assert_close(program.module()(*inputs), model(*inputs))


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_torch(reduce: str, include_self: bool) -> None:
    model = IndexReduce(1, reduce, include_self)
    x, source = torch.randn(3, 5), torch.randn(3, 4)
    index = torch.tensor([4, 0, 4, 2])  # 4 twice, 1 and 3 never
    program, count = rewritten(model, x, index, source)
    assert count == 1 and reduction_calls(program) == []
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        x, source = torch.randn(3, 5, generator=generator), torch.randn(3, 4, generator=generator)
        torch.testing.assert_close(program.module()(x, index, source), model(x, index, source))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_nan_propagates_as_in_aten(reduce: str) -> None:
    model = ScatterReduce(1, reduce, True)
    x, index, src = scatter_operands(1, 0)
    x[0, 1], src[1, 2] = float("nan"), float("nan")
    program, _ = rewritten(model, x, index, src)
    torch.testing.assert_close(
        program.module()(x, index, src), model(x, index, src), equal_nan=True
    )


def test_the_zoo_index_ops_match_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["index_ops"]()
    model = zoo.model.eval()
    program, count = rewritten(model, *zoo.inputs)
    assert count == 3  # the amax and mean scatters, the prod index_reduce
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
            torch.testing.assert_close(got, want, equal_nan=True)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: a form that ignores include_self gives other values."""
    from shimkit.aot import scatter

    original = scatter._dense_scatter_reduce
    monkeypatch.setattr(
        scatter,
        "_dense_scatter_reduce",
        lambda torch, x, dim, index, src, reduce, include_self: original(
            torch, x, dim, index, src, reduce, False
        ),
    )
    model, inputs = ScatterReduce(1, "mean", True), scatter_operands(1, 0)
    program, count = rewritten(model, *inputs)
    assert count == 1
    with pytest.raises(AssertionError):
        torch.testing.assert_close(program.module()(*inputs), model(*inputs))


def test_left_alone_sum_integer_over_the_limit_or_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import scatter

    inputs = scatter_operands(1, 0)
    assert rewritten(ScatterReduce(1, "sum", True), *inputs)[1] == 0
    x, index, src = inputs
    as_ints = (x.round().long(), index, src.round().long())
    assert rewritten(ScatterReduce(1, "amax", True), *as_ints)[1] == 0
    monkeypatch.setattr(scatter, "DENSE_LIMIT", 3 * 4 * 6 - 1)  # the index times dim 1's size
    assert rewritten(ScatterReduce(1, "amax", True), *inputs)[1] == 0
    assert rewritten(ScatterReduce(0, "amax", True), *scatter_operands(0, 0))[1] == 1
    monkeypatch.undo()
    rows = torch.export.Dim("rows", min=3, max=16)
    _, count = rewritten(
        ScatterReduce(1, "amax", True), *inputs, dynamic_shapes=({0: rows}, None, None)
    )
    assert count == 0


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(ScatterReduce(1, "amax", True), scatter_operands(1, 0))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and reduction_calls(same) == ["aten.scatter_reduce.two"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert reduction_calls(program) == [] and notes == [
        "1 scatter_reduce/index_reduce call(s) (amax, amin, prod, mean) compiled as dense "
        "comparisons (Inductor generates the kernels on CUDA; the slim CUDA shims would reduce "
        "on the host)"
    ]


class Reductions(torch.nn.Module):
    def forward(self, x: Any, index: Any, rows: Any) -> tuple[Any, Any, Any]:
        amax = x.scatter_reduce(1, index, x[:, :4] * 2, reduce="amax", include_self=False)
        mean = x.scatter_reduce(1, index, x[:, 2:], reduce="mean")
        return amax, mean, x.index_reduce(0, rows, x[:3] * 0.5, "prod")


@pytest.mark.slow
def test_compiled_dense_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.scatter import scatter_reductions_in_dense_form

    from tests.aot.math_form_run import compile_and_run

    model = Reductions()
    x, index, _ = scatter_operands(1, 0)
    inputs = (x, index, torch.tensor([3, 0, 3]))
    exported = torch.export.export(model, inputs)
    program, count = scatter_reductions_in_dense_form(torch, exported)
    assert count == 3
    run = compile_and_run(program, inputs, tmp_path / "reductions.pt2")
    assert not any(
        name.endswith(("scatter_reduce_two_out", "index_reduce")) for name in run.imports
    )
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        torch.testing.assert_close(torch.from_numpy(got), want)
    # Control: as exported, the blob calls the reductions' shims.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    assert any(name.endswith("scatter_reduce_two_out") for name in plain.imports)


class TopPMask(torch.nn.Module):
    """Top-p filtering's mask, computed in sorted order and scattered back to the vocabulary,
    and the ranks of the sort (its order scattered, int64)."""

    def forward(self, logits: Any, keep: Any, index: Any) -> tuple[Any, ...]:
        ordered, order = torch.sort(logits, descending=True, dim=-1)
        remove = ordered.softmax(-1).cumsum(-1) > 0.8
        mask = remove.scatter(-1, order, remove)
        kept = keep.scatter(0, torch.tensor([4, 0, 4]), torch.tensor([True, False, True]))
        # In place, as export keeps it (aten.scatter_.src).
        ranks = torch.zeros_like(order).scatter_(-1, order, torch.arange(9).expand(3, 9))
        # int64 with an index narrower than the input (rows 0..3 of 5): positions and a gather.
        narrow = torch.full((5, 9), -7).scatter(0, index, order[:, :9] * 10)
        # int64 from a source larger than the index: ATen reads its first 4 columns.
        wide = torch.zeros(3, 9, dtype=torch.int64).scatter(1, order[:, :4], order * 100)
        # int64 with an index narrower than the input along another dim: row 3 stays 1.
        partial = torch.ones(4, 9, dtype=torch.int64).scatter(1, order[:, :4], order)
        filtered = logits.masked_fill(mask, float("-inf")) * kept.any()
        return filtered, ranks, narrow, wide, partial


def scatter_calls(program: Any) -> list[str]:
    return calls_of(program, ("aten.scatter.src", "aten.scatter_.src"))


def top_p_inputs(seed: int) -> tuple[Any, Any, Any]:
    generator = torch.Generator().manual_seed(seed)
    index = torch.randperm(5, generator=generator)[:3].view(3, 1).expand(3, 9).contiguous()
    return torch.randn(3, 9, generator=generator), torch.zeros(6, dtype=torch.bool), index


def test_plain_scatters_of_booleans_and_int64_match_torch() -> None:
    from shimkit.aot.scatter import plain_scatters_in_generated_form

    model = TopPMask()
    exported = torch.export.export(model, top_p_inputs(0))
    assert len(scatter_calls(exported)) == 6  # control: as exported
    assert "aten.scatter_.src" in scatter_calls(exported)
    program, count = plain_scatters_in_generated_form(torch, exported)
    assert count == 6 and len(scatter_calls(program)) == 6  # each rewritten one scatters once
    dtypes = [str(n.args[0].meta["val"].dtype) for n in program.graph.nodes
              if str(n.target) == "aten.scatter.src"]  # fmt: skip
    assert sorted(dtypes) == ["torch.int32"] * 4 + ["torch.uint8"] * 2
    for seed in range(4):
        inputs = top_p_inputs(seed)
        for got, want in zip(program.module()(*inputs), model(*inputs), strict=True):
            assert torch.equal(got, want)
    same, notes = in_math_form_notes(exported, slim_cuda=False)
    assert notes == [] and same is exported
    _, notes = in_math_form_notes(exported, slim_cuda=True)
    assert (
        "6 scatter call(s) of boolean or int64 values compiled as byte scatters or as a scatter "
        "of positions and a gather (Inductor generates them on CUDA; it leaves such scatters to "
        "a fallback, which the slim CUDA shims would run on the host)"
    ) in notes


class Collisions(torch.nn.Module):
    def forward(self, index: Any, src: Any) -> Any:
        return torch.zeros(2, 4, dtype=torch.int64).scatter(1, index, src)


def test_int64_targets_several_sources_land_on_get_one_whole() -> None:
    from shimkit.aot.scatter import plain_scatters_in_generated_form

    index = torch.tensor([[0, 0, 2, 2], [1, 1, 1, 3]])
    src = torch.tensor([[2**40 + 1, 5, -(2**50), 7], [11, 2**62, 13, -1]])
    program, count = plain_scatters_in_generated_form(
        torch, torch.export.export(Collisions(), (index, src))
    )
    assert count == 1
    got = program.module()(index, src)
    assert got[0, 0].item() in (2**40 + 1, 5) and got[0, 2].item() in (-(2**50), 7)
    assert got[1, 1].item() in (11, 2**62, 13) and got[1, 3].item() == -1
    assert got[0, 1].item() == got[0, 3].item() == got[1, 0].item() == got[1, 2].item() == 0


class Ranks(torch.nn.Module):
    """A sort's ranks (its order scattered) and the first three put back, per row."""

    def forward(self, x: Any) -> tuple[Any, Any]:
        order = x.argsort(dim=-1, descending=True)
        ranks = torch.arange(x.shape[-1], device=x.device).expand_as(order)
        first = torch.full_like(order, -1).scatter(1, order[:, :3], ranks)
        return torch.empty_like(order).scatter(-1, order, ranks), first


def test_int64_scatters_of_a_shared_dynamic_batch_match_torch() -> None:
    from shimkit.aot.scatter import plain_scatters_in_generated_form

    batch = torch.export.Dim("batch", min=2, max=64)
    exported = torch.export.export(Ranks(), (torch.randn(5, 9),), dynamic_shapes=({0: batch},))
    assert len(scatter_calls(exported)) == 2  # control: as exported
    program, count = plain_scatters_in_generated_form(torch, exported)
    assert count == 2
    dtypes = [str(n.args[0].meta["val"].dtype) for n in program.graph.nodes
              if str(n.target) == "aten.scatter.src"]  # fmt: skip
    assert dtypes == ["torch.int32"] * 2
    for rows in (2, 5, 17):
        x = torch.randn(rows, 9, generator=torch.Generator().manual_seed(rows))
        for got, want in zip(program.module()(x), Ranks()(x), strict=True):
            assert torch.equal(got, want)


def test_int64_scatters_whose_index_may_outgrow_the_source_keep_their_call() -> None:
    from shimkit.aot.scatter import plain_scatters_in_generated_form

    index, src = torch.tensor([[0, 0, 2, 2], [1, 1, 1, 3]]), torch.arange(8).view(2, 4)
    # Two independent sizes: for some values the index is wider than the source.
    wide, narrow = torch.export.Dim("wide", min=2, max=4), torch.export.Dim("narrow", max=64)
    dynamic = torch.export.export(
        Collisions(), (index, src), dynamic_shapes=({1: wide}, {1: narrow})
    )
    assert plain_scatters_in_generated_form(torch, dynamic)[1] == 0
    static = torch.export.export(Collisions(), (index, src))
    assert plain_scatters_in_generated_form(torch, static)[1] == 1  # control


def test_a_call_given_by_keyword_is_checked_as_one_given_by_position() -> None:
    from types import SimpleNamespace

    from shimkit.aot.scatter import _fallback_scatter

    def traced(value: Any) -> Any:
        return SimpleNamespace(meta={"val": value})

    index = torch.zeros(2, 3, dtype=torch.int64)
    wide, narrow = torch.zeros(2, 5, dtype=torch.int64), torch.zeros(1, 5, dtype=torch.int64)
    for src in (wide, narrow):  # narrow: smaller than the index, not a valid form (control)
        by_position = SimpleNamespace(args=(traced(wide), 1, traced(index), traced(src)), kwargs={})
        by_keyword = SimpleNamespace(
            args=(traced(wide),), kwargs={"dim": 1, "index": traced(index), "src": traced(src)}
        )
        assert _fallback_scatter(by_keyword) == _fallback_scatter(by_position) == (src is wide)
    assert not _fallback_scatter(SimpleNamespace(args=(traced(wide), 1), kwargs={}))


@pytest.mark.slow
def test_compiled_plain_scatter_forms_run_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.scatter import plain_scatters_in_generated_form

    from tests.aot.math_form_run import compile_and_run

    model, inputs = TopPMask(), top_p_inputs(1)
    program, count = plain_scatters_in_generated_form(torch, torch.export.export(model, inputs))
    assert count == 6
    run = compile_and_run(program, inputs, tmp_path / "top_p.pt2")
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        assert torch.equal(torch.from_numpy(got), want)


def in_math_form_notes(exported: Any, slim_cuda: bool) -> tuple[Any, list[str]]:
    from shimkit.aot.compile import in_math_form

    return in_math_form(torch, exported, False, False, slim_cuda=slim_cuda)
