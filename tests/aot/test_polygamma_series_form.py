"""Digamma and trigamma in ATen's series form, for slim CUDA blobs (shimkit.aot.polygamma).

Inductor leaves digamma and polygamma to libtorch's proxy executor on CUDA, so compile
rewrites them for the slim CUDA target. Here, on the CPU (the form is device-neutral): each
against torch on the values where the series changes course (negative non-integers and
integers, +-0, tiny, 10 exactly, large, +-inf, NaN), in float32, float64, float16 and from
int64; each rewrite leaves no call of its op (control: as exported it is there); a form
without the recurrence fails the same comparison (control); only a negative order (which ATen
refuses) keeps its call (orders from 2 and torch.special.zeta: test_zeta_series_form.py);
nothing is rewritten unless `in_math_form` is asked for the slim CUDA target. The rewritten
program compiles and runs on the slim CPU runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")
OPS = (
    "aten.digamma.default",
    "aten.polygamma.default",
    "aten.special_digamma.default",
    "aten.special_psi.default",
    "aten.special_polygamma.default",
)
INF, NAN = float("inf"), float("nan")

# Where the series changes course: reflection (negative), its poles (negative integers and
# -0), the recurrence's count (tiny to just under 10), 10 exactly (psi(10)), the asymptotic
# series and its cut at 1e17, and the non-finite values.
EDGES = [-100.25, -7.5, -2.7, -1.3, -0.5, -1e-3, -5.0, -1.0, -0.0, 0.0, 1e-30, 1e-3, 0.5]
EDGES += [1.0, 1.4616321, 2.0, 3.3, 9.0, 9.999, 10.0, 10.5, 123.4, 1e5, 1e18, INF, -INF, NAN]


def op_calls(program: Any) -> list[str]:
    return calls_of(program, OPS)


class Gammas(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        return (
            torch.digamma(x),
            torch.polygamma(0, x),
            torch.polygamma(1, x),
            torch.special.digamma(x * 0.5 + 1),
            torch.special.psi(x),
            torch.special.polygamma(1, x - 0.25),
        )


def values(dtype: Any = torch.float32, seed: int = 0) -> Any:
    spread = torch.randn(40, generator=torch.Generator().manual_seed(seed)) * 8
    return torch.cat([torch.tensor(EDGES), spread]).to(dtype)


def rewritten(model: Any, *inputs: Any) -> tuple[Any, int]:
    from shimkit.aot.polygamma import polygammas_in_series_form

    exported = torch.export.export(model, inputs)
    assert op_calls(exported)  # control: as exported, the calls are there
    return polygammas_in_series_form(torch, exported)


def assert_matches(got: Any, want: Any, rtol: float, atol: float) -> None:
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [
        (torch.float32, 2e-6, 2e-6),
        (torch.float64, 1e-13, 1e-13),
        (torch.float16, 1e-3, 1e-3),
        (torch.bfloat16, 8e-3, 8e-3),
    ],
)
def test_series_match_torch(dtype: Any, rtol: float, atol: float) -> None:
    model = Gammas()
    program, count = rewritten(model, values(dtype))
    assert count == 6 and op_calls(program) == []
    for seed in range(3):
        x = values(dtype, seed)
        for got, want in zip(program.module()(x), model(x), strict=True):
            assert_matches(got, want, rtol, atol)


def test_poles_and_infinities_as_torch_gives_them() -> None:
    model = Gammas()
    program, _ = rewritten(model, values())
    x = values()
    x[:6] = torch.tensor([0.0, -0.0, -3.0, INF, -INF, NAN])
    digamma = program.module()(x)[0][:6]
    assert digamma[0] == -INF and digamma[1] == INF and digamma[3] == INF
    assert digamma[2].isnan() and digamma[4].isnan() and digamma[5].isnan()
    assert_matches(digamma, torch.digamma(x[:6]), 0.0, 0.0)


class IntegerInput(torch.nn.Module):
    def forward(self, i: Any) -> tuple[Any, Any]:
        return torch.digamma(i), torch.polygamma(1, i)


def test_integer_input_is_taken_as_float32() -> None:
    model, i = IntegerInput(), torch.arange(-3, 40)
    program, count = rewritten(model, i)
    assert count == 2
    for got, want in zip(program.module()(i), model(i), strict=True):
        assert got.dtype == torch.float32
        assert_matches(got, want, 2e-6, 2e-6)


def test_without_the_recurrence_the_comparison_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import polygamma

    monkeypatch.setattr(polygamma, "DIGAMMA_STEPS", 0)
    model, x = Gammas(), values()
    program, _ = rewritten(model, x)
    with pytest.raises(AssertionError):
        assert_matches(program.module()(x)[0], model(x)[0], 2e-6, 2e-6)


def test_only_a_negative_order_keeps_its_call() -> None:
    from types import SimpleNamespace

    from shimkit.aot.polygamma import _non_negative_order

    for order, rewritten_ in ((0, True), (1, True), (2, True), (9, True), (-1, False)):
        assert _non_negative_order(SimpleNamespace(args=(order, None), kwargs={})) is rewritten_


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Gammas(), (values(),))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and len(op_calls(same)) == 6
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert op_calls(program) == [] and notes == [
        "6 digamma/polygamma/zeta call(s) compiled in ATen's series form (Inductor "
        "generates it on CUDA; this torch has no C shim for them)"
    ]


@pytest.mark.slow
def test_compiled_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from tests.aot.math_form_run import compile_and_run

    model, inputs = Gammas(), (values(),)
    program, count = rewritten(model, *inputs)
    assert count == 6
    run = compile_and_run(program, inputs, tmp_path / "gammas.pt2")
    assert not any("gamma" in name for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        assert_matches(torch.from_numpy(got), want, 2e-6, 2e-6)
