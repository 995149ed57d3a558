"""igamma and igammac as a series and a continued fraction, for slim CUDA blobs
(shimkit.aot.incomplete_gamma).

Inductor's Triton has no igamma, so compile rewrites igamma, igammac and torch.special's
gammainc and gammaincc for the slim CUDA target. Here, on the CPU (the form is
device-neutral): each against ATen in float64 over a grid of a from 1e-3 to 500 and x from
1e-6 a to 30 a (where the expansions change course, and x near a, where they need the most
terms), broadcast, in place, from float32 and int64; ATen's edge values (zeros, negative
arguments, infinities, NaN) exactly; controls: with fewer terms of the series and the
fraction, or of the small-x series, the same comparisons fail; nothing is rewritten unless
`in_math_form` is asked for the slim CUDA target. For a from 20 to 1e5 against exact values
(mpmath), where Temme's expansion takes over (control: without it the comparison fails), and
the expansion's coefficients against DLMF's. The rewritten program compiles and runs on the
slim CPU runtime.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")
OPS = (
    "aten.igamma.default",
    "aten.igammac.default",
    "aten.special_gammainc.default",
    "aten.special_gammaincc.default",
    "aten.igamma_.default",
    "aten.igammac_.default",
)
INF, NAN = float("inf"), float("nan")
SHAPES = [1e-3, 0.01, 0.1, 0.5, 1, 2, 3.5, 5, 10, 20, 35, 50, 80, 100, 150, 200, 300, 500]
RATIOS = [1e-6, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.85, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05]
RATIOS += [1.1, 1.15, 1.3, 1.6, 2, 3, 5, 10, 30]


class Incomplete(torch.nn.Module):
    def forward(self, a: Any, x: Any) -> tuple[Any, ...]:
        in_place = a.clone()
        in_place.igammac_(x)
        return (
            torch.igamma(a, x),
            torch.igammac(a, x),
            torch.special.gammainc(a, x),
            torch.special.gammaincc(a, x),
            in_place,
        )


def grid(dtype: Any = torch.float64) -> tuple[Any, Any]:
    """(a, x): every shape with x at every ratio of it, and small values at random."""
    shape, ratio = torch.meshgrid(
        torch.tensor(SHAPES, dtype=torch.float64),
        torch.tensor(RATIOS, dtype=torch.float64),
        indexing="ij",
    )
    spread = torch.rand(2, 400, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = torch.cat([shape.flatten(), spread[0] * 3])
    x = torch.cat([(shape * ratio).flatten(), spread[1] * 3])
    return a.to(dtype), x.to(dtype)


def rewritten(model: Any, *inputs: Any) -> tuple[Any, int]:
    from shimkit.aot.incomplete_gamma import incomplete_gammas_in_series_form

    exported = torch.export.export(model, inputs)
    assert calls_of(exported, OPS)  # control: as exported, the calls are there
    return incomplete_gammas_in_series_form(torch, exported)


def assert_matches(got: Any, want: Any, rtol: float) -> None:
    """Within `rtol` of `want`, or both below the smallest normal value (where Q underflows,
    ATen's forward fraction flushes to 0 and the form can keep a subnormal)."""
    assert got.dtype == want.dtype
    tiny = torch.finfo(want.dtype).tiny
    torch.testing.assert_close(got, want, rtol=rtol, atol=tiny, equal_nan=True)


def test_float64_matches_aten() -> None:
    model, (a, x) = Incomplete(), grid()
    program, count = rewritten(model, a, x)
    assert count == 5 and calls_of(program, OPS) == []
    assert any(n.target is torch.ops.higher_order.while_loop for n in program.graph.nodes)
    for got, want in zip(program.module()(a, x), model(a, x), strict=True):
        assert_matches(got, want, 5e-8)


def test_float32_within_its_precision_of_aten_in_float64() -> None:
    model, (a, x) = Incomplete(), grid(torch.float32)
    program, _ = rewritten(model, a, x)
    exact = model(a.double(), x.double())
    for got, want in zip(program.module()(a, x), exact, strict=True):
        assert_matches(got, want.float(), 2e-6)


def test_broadcast_and_integer_input() -> None:
    class Broadcast(torch.nn.Module):
        def forward(self, a: Any, x: Any) -> tuple[Any, Any]:
            return torch.igamma(a, x), torch.igammac(a.double(), x)

    model, a, x = Broadcast(), torch.arange(1, 9).reshape(8, 1), torch.arange(0, 30)
    program, count = rewritten(model, a, x)
    assert count == 2
    lower, upper = program.module()(a, x)
    assert lower.shape == upper.shape == (8, 30)
    assert lower.dtype == torch.float32 and upper.dtype == torch.float64
    assert_matches(lower, torch.igamma(a.double(), x.double()).float(), 2e-6)
    assert_matches(upper, torch.igammac(a.double(), x), 1e-12)


def test_edge_values_as_aten_gives_them() -> None:
    edges = [0.0, 1e-300, 0.5, 3.0, INF, -1.0, NAN]
    a, x = torch.meshgrid(torch.tensor(edges), torch.tensor(edges), indexing="ij")
    a, x = a.flatten().double(), x.flatten().double()
    model = Incomplete()
    program, _ = rewritten(model, a, x)
    for got, want in zip(program.module()(a, x), model(a, x), strict=True):
        assert_matches(got, want, 1e-12)


def test_with_fewer_terms_the_comparison_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import incomplete_gamma

    model, (a, x) = Incomplete(), grid()
    for name, fewer in (("FLOAT64_TERMS", 16), ("SMALL_X_TERMS", 3)):
        with monkeypatch.context() as patch:
            patch.setattr(incomplete_gamma, name, fewer)
            program, _ = rewritten(model, a, x)
            with pytest.raises(AssertionError):
                for got, want in zip(program.module()(a, x), model(a, x), strict=True):
                    assert_matches(got, want, 5e-8)


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Incomplete(), grid())
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and len(calls_of(same, OPS)) == 5
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert calls_of(program, OPS) == [] and notes == [
        "5 igamma/igammac call(s) compiled as a series, a continued fraction and Temme's "
        "expansion (Inductor generates them on CUDA; the slim CUDA shims have no igamma)"
    ]


@pytest.mark.slow
def test_compiled_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from tests.aot.math_form_run import compile_and_run

    class Upper(torch.nn.Module):  # one call (each takes Inductor ~20 s): Q uses every expansion
        def forward(self, a: Any, x: Any) -> Any:
            return torch.igammac(a, x)

    model, inputs = Upper(), grid(torch.float32)
    program, count = rewritten(model, *inputs)
    assert count == 1
    run = compile_and_run(program, inputs, tmp_path / "incomplete_gamma.pt2")
    assert not any("igamma" in name for name in run.imports)
    exact = model(*(value.double() for value in inputs)).float()
    assert_matches(torch.from_numpy(run.outputs[0]), exact, 2e-6)


def exact(a: float, x: float) -> tuple[float, float]:
    """(P(a, x), Q(a, x)) in 60 digits (mpmath, which sympy, torch's dependency, brings): the
    smaller one exactly, the other as 1 minus it; P by its series (mpmath's hypergeometric
    sum), Q by Legendre's fraction evaluated forwards until it converges."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(60):
        a_, x_ = mpmath.mpf(a), mpmath.mpf(x)
        if x_ < a_:
            log_prefactor = a_ * mpmath.log(x_) - x_ - mpmath.loggamma(a_ + 1)
            p = mpmath.exp(log_prefactor) * mpmath.hyp1f1(1, a_ + 1, x_, maxterms=10**7)
            return float(p), float(1 - p)
        tiny = mpmath.mpf(10) ** -200
        b = x_ + 1 - a_
        c, d = 1 / tiny, 1 / b
        fraction = d
        for n in range(1, 10**6):  # Lentz's method
            step = -n * (n - a_)
            b += 2
            d = 1 / ((step * d + b) or tiny)
            c = (b + step / c) or tiny
            fraction *= c * d
            if abs(c * d - 1) < mpmath.mpf(10) ** -45:
                break
        q = mpmath.exp(a_ * mpmath.log(x_) - x_ - mpmath.loggamma(a_)) * fraction
        return float(1 - q), float(q)


def large_shapes(dtype: Any) -> tuple[Any, Any]:
    """a from 20 to 1e5, x from 0.2 a to 4 a (a third of them near a), rounded to `dtype`."""
    spread = torch.rand(3, 240, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a = 10 ** (1.3 + 3.7 * spread[0])
    ratio = torch.where(spread[1] < 0.5, 0.2 + 0.8 * spread[2], 1 + 3 * spread[2])
    ratio[::3] = 0.6 + 0.8 * spread[2, ::3]
    return a.to(dtype), (a * ratio).to(dtype)


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 2e-10), (torch.float32, 1e-6)])
def test_large_shapes_against_exact_values(dtype: Any, rtol: float) -> None:
    """Where the series and the fraction would need terms in proportion to sqrt(a), Temme's
    expansion keeps the type's precision (float64: 1.2e-11 here, the conditioning of x^a e^-x,
    a log x - x, a difference of numbers of 1e5); control: without the expansion it fails."""
    from shimkit.aot import incomplete_gamma

    model, (a, x) = Incomplete(), large_shapes(dtype)
    pairs = [exact(u, v) for u, v in zip(a.double().tolist(), x.double().tolist(), strict=True)]
    p, q = (torch.tensor(values, dtype=torch.float64) for values in zip(*pairs, strict=True))
    # Compared where the value is a normal number of the type.
    normal = (p > torch.finfo(dtype).tiny * 1e8) & (q > torch.finfo(dtype).tiny * 1e8)

    def largest_error(program: Any) -> float:
        lower, upper = program.module()(a, x)[:2]
        return max(
            ((got.double() - want) / want)[normal].abs().max().item()
            for got, want in ((lower, p), (upper, q))
        )

    program, _ = rewritten(model, a, x)
    assert largest_error(program) < rtol
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(incomplete_gamma, "UNIFORM_FROM", math.inf)
        program, _ = rewritten(model, a, x)
        assert largest_error(program) > 100 * rtol


def test_expansion_coefficients_are_dlmfs() -> None:
    """The first coefficients of c_0 and c_1 as DLMF 8.12.11 and 8.12.12 print them, and of c_2
    the constant; the derivation checks that the poles at eta = 0 cancel at every order."""
    from shimkit.aot.gamma_asymptotic import coefficients

    c = coefficients(3, 4)
    assert c[0] == pytest.approx([-1 / 3, 1 / 12, -2 / 135, 1 / 864], rel=1e-15)
    assert c[1][:2] == pytest.approx([-1 / 540, -1 / 288], rel=1e-15)
    assert c[2][0] == pytest.approx(25 / 6048, rel=1e-15)
    assert len(coefficients(25, 25)) == 25
