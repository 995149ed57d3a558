"""Hurwitz zeta and polygamma of order 2 and above in ATen's series form, for slim CUDA blobs
(shimkit.aot.zeta, shimkit.aot.polygamma).

Inductor leaves `torch.special.zeta` and `torch.polygamma` to libtorch's proxy executor on
CUDA, so compile rewrites them for the slim CUDA target. Here, on the CPU (the form is
device-neutral): zeta with two tensors and with either side a number, in float32, float64
and from integers, against ATen where its sum is exact (q > 0, over the values where the
series changes course: x near 1, tiny to huge q, 9 and 10); ATen's special values (x = 1,
x < 1, q a non-positive integer, a negative q with a non-integer x, NaN, x = inf); for a
negative q, where ATen's own float sum cancels to its rounding error for odd x (at (31,
-7.5) it is off by 22 orders of magnitude), against the terms summed in 80-digit
arithmetic; polygamma of orders 2 to 7, also of negative non-integer x, against ATen; a
form with fewer direct terms or without the Euler-Maclaurin terms fails the comparison
(controls), and the rewrite leaves no call (control: as exported they are there). The
rewritten program compiles and runs on the slim CPU runtime.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")
OPS = (
    "aten.polygamma.default",
    "aten.special_polygamma.default",
    "aten.special_zeta.default",
    "aten.special_zeta.self_scalar",
    "aten.special_zeta.other_scalar",
)
INF, NAN = float("inf"), float("nan")

# x: near 1, where the direct sum has most of the value, integers (polygamma's), large.
X_VALUES = [1.0001, 1.1, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 11.0, 20.0]
# q > 0: tiny, below and above 1, where the correction starts (9, 10), large.
Q_VALUES = [1e-3, 0.1, 0.5, 1.0, 1.7, 3.3, 9.0, 10.0, 27.5, 123.4, 1e4]
TOLERANCES = {torch.float32: 1e-6, torch.float64: 1e-14}


def op_calls(program: Any) -> list[str]:
    return calls_of(program, OPS)


def grid(dtype: Any) -> tuple[Any, Any]:
    """Every pair whose zeta is a normal float32 (ATen's CPU kernel sums float32 in float64,
    its CUDA kernel and the form in float32: below 1e-30 their terms are subnormal)."""
    x, q = torch.meshgrid(torch.tensor(X_VALUES), torch.tensor(Q_VALUES), indexing="ij")
    x, q = x.reshape(-1), q.reshape(-1)
    normal = torch.special.zeta(x.double(), q.double()) > 1e-30
    return x[normal].to(dtype), q[normal].to(dtype)


class Zetas(torch.nn.Module):
    def forward(self, x: Any, q: Any) -> tuple[Any, ...]:
        return torch.special.zeta(x, q), torch.special.zeta(x, 2.5), torch.special.zeta(3.0, q)


class Polygammas(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        orders = [torch.polygamma(n, x) for n in (2, 3, 4, 7)]
        return (*orders, torch.special.polygamma(5, x * 0.5 + 0.25))


def rewritten(model: Any, *inputs: Any) -> tuple[Any, int]:
    from shimkit.aot.polygamma import polygammas_in_series_form

    exported = torch.export.export(model, inputs)
    assert op_calls(exported)  # control: as exported, the calls are there
    return polygammas_in_series_form(torch, exported)


def assert_matches(got: Any, want: Any, rtol: float) -> None:
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=rtol, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_matches_aten_for_positive_q(dtype: Any) -> None:
    model, inputs = Zetas(), grid(dtype)
    program, count = rewritten(model, *inputs)
    assert count == 3 and op_calls(program) == []
    for got, want in zip(program.module()(*inputs), model(*inputs), strict=True):
        assert_matches(got, want, TOLERANCES[dtype])


def test_integer_and_mixed_types_promote_as_torch() -> None:
    class Mixed(torch.nn.Module):
        def forward(self, i: Any, x: Any) -> tuple[Any, ...]:
            return (
                torch.special.zeta(i, i),
                torch.special.zeta(x.double(), i),
                torch.special.zeta(i, 2),
            )

    model, i, x = Mixed(), torch.arange(-3, 20), torch.rand(23) + 1
    program, count = rewritten(model, i, x)
    assert count == 3
    got, want = program.module()(i, x), model(i, x)
    assert [t.dtype for t in got] == [torch.float32, torch.float64, torch.float32]
    for got_one, want_one in zip(got, want, strict=True):
        assert_matches(got_one, want_one, 1e-6)


def test_special_values_as_aten_gives_them() -> None:
    x = torch.tensor([1.0, 0.5, -2.0, 2.0, 2.0, 2.0, 2.5, 3.0, NAN, 2.0, INF, INF, INF, INF])
    q = torch.tensor([2.0, 2.0, 2.0, 0.0, -0.0, -3.0, -2.5, -2.5, 1.0, NAN, 0.5, 1.0, -2.5, 0.0])
    program, _ = rewritten(Zetas(), x, q)
    got, want = program.module()(x, q)[0], torch.special.zeta(x, q)
    assert got[0] == INF and got[1].isnan() and got[3] == got[4] == got[5] == INF
    assert got[6].isnan() and got[10] == INF and got[11] == 1.0 and got[12] == INF
    assert_matches(got, want, 1e-6)


def direct_sum(x: float, q: float) -> float:
    """zeta(x, q) for a negative q, its terms summed in 80-digit arithmetic: those of
    negative base one by one, the rest through mpmath's zeta of a positive argument."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(80):
        count = math.ceil(-q)
        q_exact = mpmath.mpf(q)
        negative = sum((q_exact + k) ** -int(x) for k in range(count))
        return float(negative + mpmath.zeta(x, q_exact + count))


NEGATIVE = [(2.0, -0.001), (3.0, -0.3), (3.0, -2.7), (4.0, -7.5), (5.0, -0.5), (7.0, -7.5)]
NEGATIVE += [(11.0, -3.3), (31.0, -7.5), (2.0, -100.25), (6.0, -40.9), (3.0, -1e3 - 0.5)]


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_negative_q_against_the_terms_summed_exactly(dtype: Any, rtol: float) -> None:
    x = torch.tensor([x for x, _ in NEGATIVE], dtype=dtype)
    q = torch.tensor([q for _, q in NEGATIVE], dtype=dtype)
    program, _ = rewritten(Zetas(), x, q)
    got = program.module()(x, q)[0]
    # The reference from the values as stored in `dtype`.
    pairs = zip(x.tolist(), q.tolist(), strict=True)
    want = torch.tensor([direct_sum(a, b) for a, b in pairs], dtype=torch.float64)
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=0.0)


def polygamma_values(dtype: Any) -> Any:
    # Negative non-integers where ATen's float sum is exact (no cancellation), 0..10, large.
    x = [-3.3, -2.7, -1.25, -0.6, 1e-3, 0.3, 1.0, 2.5, 9.0, 9.99, 10.0, 12.5, 40.0, 1e3]
    return torch.tensor(x, dtype=dtype)


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float32, 1e-6), (torch.float64, 1e-14)])
def test_polygamma_of_higher_orders_matches_aten(dtype: Any, rtol: float) -> None:
    model, x = Polygammas(), polygamma_values(dtype)
    program, count = rewritten(model, x)
    assert count == 5 and op_calls(program) == []
    for got, want in zip(program.module()(x), model(x), strict=True):
        assert_matches(got, want, rtol)


@pytest.mark.parametrize(("name", "value"), [("DIRECT_TERMS", 2), ("EULER_MACLAURIN", ())])
def test_a_shorter_series_fails_the_comparison(
    monkeypatch: pytest.MonkeyPatch, name: str, value: Any
) -> None:
    from shimkit.aot import zeta

    monkeypatch.setattr(zeta, name, value)
    model, inputs = Zetas(), grid(torch.float64)
    program, _ = rewritten(model, *inputs)
    with pytest.raises(AssertionError):
        assert_matches(program.module()(*inputs)[0], model(*inputs)[0], 1e-6)


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Zetas(), grid(torch.float32))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and len(op_calls(same)) == 3
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert op_calls(program) == [] and notes == [
        "3 digamma/polygamma/zeta call(s) compiled in ATen's series form (Inductor generates it "
        "on CUDA; this torch has no C shim for them)"
    ]


class Zeta(torch.nn.Module):
    def forward(self, x: Any, q: Any) -> tuple[Any]:
        return (torch.special.zeta(x, q),)


# One call: polygamma of higher orders is this form times a constant (checked above), and
# each call is a kernel of three series that Inductor's C++ backend compiles for a minute.
@pytest.mark.slow
def test_compiled_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from tests.aot.math_form_run import compile_and_run

    model, inputs = Zeta(), grid(torch.float32)
    program, count = rewritten(model, *inputs)
    assert count == 1
    run = compile_and_run(program, inputs, tmp_path / "zeta.pt2")
    assert not any("zeta" in name or "gamma" in name for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        assert_matches(torch.from_numpy(got), want, 3e-6)
