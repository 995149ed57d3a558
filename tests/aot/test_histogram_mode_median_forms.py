"""Histograms, modes and whole-tensor medians in forms Inductor generates, for slim CUDA
blobs (shimkit.aot.histogram, shimkit.aot.mode, shimkit.aot.median's whole-tensor form).

The slim CUDA shims compute histc, mode and the whole-tensor medians on the host; compile
rewrites them for slim CUDA blobs. Here, on the CPU (the forms are device-neutral): each
against torch, with ties, NaN, elements on the range's limits, fixed and data ranges, int and
bool modes (the index: ATen's CPU one, the last position of the value), the zoo's index-ops
model; each rewrite leaves no call of its op (control: as exported it is there), and a
wrong form fails the same comparison (control). Left alone: histograms of dynamic size, a
mode's long or dynamic dim, medians of more elements than Inductor sorts, and every call unless
`in_math_form` is asked for the slim CUDA target. Rewritten programs compile and run on the
slim CPU runtime without those ops' shims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")
NAN = float("nan")
OPS = ("aten.histc.default", "aten.mode.default", "aten.median.default", "aten.nanmedian.default")


def op_calls(program: Any) -> list[str]:
    return calls_of(program, OPS)


def rewritten(form: Any, model: Any, *inputs: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert op_calls(exported)  # control: as exported, the call is there
    return form(torch, exported)


def histogram_form(torch: Any, exported: Any) -> tuple[Any, int]:
    from shimkit.aot.histogram import histograms_in_index_add_form

    return histograms_in_index_add_form(torch, exported)


def mode_form(torch: Any, exported: Any) -> tuple[Any, int]:
    from shimkit.aot.mode import modes_in_dense_form

    return modes_in_dense_form(torch, exported)


def median_form(torch: Any, exported: Any) -> tuple[Any, int]:
    from shimkit.aot.median import whole_medians_in_sort_form

    return whole_medians_in_sort_form(torch, exported)


class Histograms(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        return (
            torch.histc(torch.tanh(x), bins=5, min=-1.0, max=1.0),
            torch.histc(x, 6, -0.5, 0.75),  # elements on both limits, some outside, NaN
            torch.histc(x.nan_to_num(), 7),  # the data's range
            torch.histc(x.nan_to_num() * 0 + 2, 4),  # all equal: widened by 1 each side
        )


def histogram_input(seed: int) -> Any:
    x = torch.randn(8, 9, generator=torch.Generator().manual_seed(seed))
    x[0, :3] = torch.tensor([NAN, 0.75, -0.5])
    return x


def test_histograms_match_torch() -> None:
    model = Histograms()
    program, count = rewritten(histogram_form, model, histogram_input(0))
    assert count == 4 and op_calls(program) == []
    for seed in range(5):
        x = histogram_input(seed)
        for got, want in zip(program.module()(x), model(x), strict=True):
            assert torch.equal(got, want), (got, want)


class Modes(torch.nn.Module):
    def forward(self, x: Any, i: Any, b: Any) -> tuple[Any, ...]:
        return torch.mode(x, 0), torch.mode(x, 1, keepdim=True), torch.mode(i), torch.mode(b, 0)


def mode_inputs(seed: int) -> tuple[Any, Any, Any]:
    """Few distinct values: ties in frequency, repeated values at several positions."""
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, 4, (6, 9), generator=generator).float() * 0.5,
        torch.randint(-3, 3, (4, 7), generator=generator),
        torch.randint(0, 2, (5, 3), generator=generator).bool(),
    )


def test_modes_match_torch_values_and_indices() -> None:
    model = Modes()
    program, count = rewritten(mode_form, model, *mode_inputs(0))
    assert count == 4 and op_calls(program) == []
    for seed in range(10):
        inputs = mode_inputs(seed)
        for got, want in zip(program.module()(*inputs), model(*inputs), strict=True):
            assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)


class Medians(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        return x.median(), x.nanmedian(), x[0, 0].median(), x[:, :2].nanmedian()


@pytest.mark.parametrize("nans", ["none", "one", "all"])
def test_whole_medians_match_torch(nans: str) -> None:
    model = Medians()
    program, count = rewritten(median_form, model, torch.randn(6, 7))
    assert count == 4 and op_calls(program) == []
    for seed in range(3):
        x = torch.round(torch.randn(6, 7, generator=torch.Generator().manual_seed(seed)) * 2)
        if nans == "one":
            x[1, 2] = NAN
        elif nans == "all":
            x[:] = NAN
        for got, want in zip(program.module()(x), model(x), strict=True):
            assert torch.equal(got.nan_to_num(99.0), want.nan_to_num(99.0)), (got, want)


def test_the_zoo_index_ops_match_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["index_ops"]()
    model = zoo.model.eval()
    for form, count in ((histogram_form, 1), (mode_form, 1), (median_form, 2)):
        program, rewrote = rewritten(form, model, *zoo.inputs)
        assert rewrote == count
        with torch.no_grad():
            for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
                torch.testing.assert_close(got, want, equal_nan=True)


def test_wrong_forms_fail_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Controls: a histogram whose limits are doubled, and a median that drops NaN, differ
    from torch."""
    from shimkit.aot import histogram, median

    monkeypatch.setattr(histogram, "_rounded", lambda value, dtype, torch: value * 2)
    program, _ = rewritten(histogram_form, Histograms(), histogram_input(0))
    got, want = program.module()(histogram_input(1)), Histograms()(histogram_input(1))
    assert not all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    nan_blind = median._median
    monkeypatch.setattr(median, "_median", lambda torch, ignore_nan: nan_blind(torch, True))
    x = torch.randn(6, 7)
    x[1, 2] = NAN
    program, _ = rewritten(median_form, Medians(), x)
    assert not torch.isnan(program.module()(x)[0]) and torch.isnan(Medians()(x)[0])


class RowModes(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.mode(x, 1)


def test_left_alone_long_or_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import mode

    monkeypatch.setattr(mode, "DIM_LIMIT", 8)
    assert rewritten(mode_form, Modes(), *mode_inputs(0))[1] == 3  # the dim of 9 is kept
    monkeypatch.undo()
    x = torch.randn(6, 9)
    columns = torch.export.Dim("columns", min=2, max=64)
    assert rewritten(mode_form, RowModes(), x, dynamic_shapes=({1: columns},))[1] == 0
    rows = torch.export.Dim("rows", min=2, max=64)
    assert rewritten(histogram_form, Histograms(), x, dynamic_shapes=({0: rows},))[1] == 0
    assert rewritten(median_form, Medians(), torch.randn(23, 23))[1] == 2  # 529 > 512 twice
    assert rewritten(median_form, Medians(), torch.randn(22, 23))[1] == 4


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Medians(), (torch.randn(6, 7),))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and len(op_calls(same)) == 4
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert op_calls(program) == [] and notes == [
        "4 whole-tensor median/nanmedian call(s) compiled as a stable sort and a pick (Inductor "
        "generates the sort on CUDA; the slim CUDA shims would select on the host)"
    ]


class Statistics(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        rounded = torch.round(x * 2)
        common = torch.mode(rounded, 1)
        return torch.histc(x, 5, -1.0, 1.0), common.values, common.indices, x.median()


@pytest.mark.slow
def test_compiled_forms_run_on_the_slim_runtime(tmp_path: Path) -> None:
    from tests.aot.math_form_run import compile_and_run

    model, inputs = Statistics(), (torch.randn(5, 8),)
    exported = torch.export.export(model, inputs)
    program = exported
    for form in (histogram_form, mode_form, median_form):
        program, count = form(torch, program)
        assert count == 1
    run = compile_and_run(program, inputs, tmp_path / "statistics.pt2")
    assert not any(name.endswith(("_histc", "_mode", "_median")) for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        assert torch.equal(torch.from_numpy(got), want)
    # Control: as exported, the blob calls the three shims.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    for op in ("_histc", "_mode", "_median"):
        assert any(name.endswith(op) for name in plain.imports), op
