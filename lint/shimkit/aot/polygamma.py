"""Digamma, polygamma and Hurwitz zeta in their series form, for slim CUDA blobs.

Inductor generates `digamma`, `polygamma` and `zeta` on the CPU (its C++ prelude has them)
but not in Triton: on CUDA it leaves them to libtorch's proxy executor, which no slim runtime
has, so compile refused a model with `torch.digamma` (the entropy or KL divergence of a
Beta, Gamma or Dirichlet distribution, for one) for the slim CUDA target. For that target
compile writes `digamma`, `polygamma` and `special.zeta` (and torch.special's `digamma`,
`psi` and `polygamma`) in ATen's own series, elementwise ops Inductor fuses into one kernel:

- digamma (ATen's `calc_digamma`): a negative x reflected to 1 - x with -pi / tan(pi * r)
  (r the fractional part of x), then the recurrence psi(x) = psi(x + 1) - 1 / x until x
  reaches 10 (at most ten steps, unrolled; step k takes x + k where ATen adds 1 at each),
  then the asymptotic series (or psi(10) exactly where x lands on 10). +-0 gives -+inf and
  a negative integer NaN, as ATen gives them.
- trigamma (ATen's `trigamma`): x below 1/2 reflected with pi^2 / sin^2(pi x), six steps of
  the recurrence, then its asymptotic series.
- polygamma of order n >= 2 (ATen's `calc_polygamma`): (-1)^(n+1) n! zeta(n + 1, x), and
  `special.zeta(x, q)`, with Hurwitz's zeta in ATen's series (`shimkit.aot.zeta`).

All run in float32 for float16, bfloat16 and float32 input and in float64 for float64, as
ATen's CUDA kernels do (tests/aot/test_polygamma_series_form.py: within a few float32 ulps
of ATen; test_zeta_series_form.py). Integer input is taken as float32, as torch promotes it.
A negative order keeps the call (ATen refuses it).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import argument, computation_dtypes, rewrite_calls
from shimkit.aot.zeta import hurwitz_zeta

# ATen's calc_digamma: psi(10), and the asymptotic series' coefficients (highest power of
# 1 / x^2 first, as its polevl takes them).
PSI_10 = 2.25175258906672110764
DIGAMMA_SERIES = (
    8.33333333333333333333e-2,
    -2.10927960927960927961e-2,
    7.57575757575757575758e-3,
    -4.16666666666666666667e-3,
    3.96825396825396825397e-3,
    -8.33333333333333333333e-3,
    8.33333333333333333333e-2,
)
# Recurrence steps: digamma takes x up to 10 (from above 0, at most ten steps); trigamma
# always takes six.
DIGAMMA_STEPS = 10
TRIGAMMA_STEPS = 6


def _computed_in(torch: ModuleType, x: Any) -> tuple[Any, Any]:
    """(x in the type ATen computes it in, the result's type)."""
    computed, result = computation_dtypes(torch, x.dtype)
    return x.to(computed), result


def _digamma(torch: ModuleType, x: Any) -> Any:
    negative = x < 0
    fraction = x - torch.trunc(x)
    reflection = torch.where(negative, -math.pi / torch.tan(math.pi * fraction), 0.0)
    start = torch.where(negative, 1 - x, x)
    # The recurrence's steps, each from `start` (a chain of `shifted + 1` would make each
    # step read the previous one twice, and Inductor walks such a chain once per read).
    steps = [start + k for k in range(DIGAMMA_STEPS)]
    taken = [step < 10 for step in steps]
    result = reflection
    for step, below in zip(steps, taken, strict=True):
        result = result - torch.where(below, 1 / step, 0.0)
    shifted = start + sum(below.to(start.dtype) for below in taken)
    z = 1 / (shifted * shifted)
    series = torch.zeros_like(z)
    for coefficient in DIGAMMA_SERIES:
        series = series * z + coefficient
    tail = torch.where(shifted < 1.0e17, z * series, 0.0)
    asymptotic = torch.log(shifted) - 0.5 / shifted - tail + result
    out = torch.where(shifted == 10, result + PSI_10, asymptotic)
    out = torch.where(negative & (x == torch.trunc(x)), math.nan, out)
    return torch.where(x == 0, torch.copysign(torch.full_like(x, math.inf), -x), out)


def _trigamma(torch: ModuleType, x: Any) -> Any:
    reflected = x < 0.5
    sine = torch.sin(math.pi * x)
    result = torch.where(reflected, -(math.pi**2) / (sine * sine), 0.0)
    start = torch.where(reflected, 1 - x, x)
    for k in range(TRIGAMMA_STEPS):  # each step from `start`, as digamma's
        step = start + k
        result = result + 1 / (step * step)
    shifted = start + TRIGAMMA_STEPS
    inverse_square = 1 / (shifted * shifted)
    series = 1 / 30 - inverse_square * (1 / 42)
    series = 1 / 6 - inverse_square * series
    result = result + (1 + 1 / (2 * shifted) + inverse_square * series) / shifted
    return torch.where(reflected, -result, result)


def _digamma_form(torch: ModuleType) -> Any:
    def digamma(x: Any) -> Any:
        computed, result = _computed_in(torch, x)
        return _digamma(torch, computed).to(result)

    return digamma


def _higher_order(torch: ModuleType, n: int, x: Any) -> Any:
    """ATen's calc_polygamma for n >= 2 (n! exactly, where ATen takes exp(lgamma(n + 1)))."""
    sign = 1.0 if n % 2 else -1.0
    return sign * float(math.factorial(n)) * hurwitz_zeta(torch, torch.full_like(x, n + 1), x)


def _polygamma_form(torch: ModuleType) -> Any:
    def polygamma(n: int, x: Any) -> Any:
        if n < 0:
            return NotImplemented
        computed, result = _computed_in(torch, x)
        if n == 0:
            return _digamma(torch, computed).to(result)
        if n == 1:
            return _trigamma(torch, computed).to(result)
        return _higher_order(torch, n, computed).to(result)

    return polygamma


def _zeta_form(torch: ModuleType) -> Any:
    def zeta(x: Any, q: Any) -> Any:
        # The scalar overloads: the number takes the tensor's shape and ATen's type.
        computed, result = computation_dtypes(torch, torch.result_type(x, q))
        tensor = x if torch.is_tensor(x) else q
        x, q = (
            value.to(computed)
            if torch.is_tensor(value)
            else torch.full_like(tensor, value, dtype=computed)
            for value in (x, q)
        )
        return hurwitz_zeta(torch, x, q).to(result)

    return zeta


def _non_negative_order(node: Any) -> bool:
    order = argument(node, 0, "n", None)
    return isinstance(order, int) and order >= 0


def polygammas_in_series_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every digamma, polygamma of order >= 0 and special.zeta in its
    series form, how many calls were rewritten)."""
    ops = torch.ops.aten
    digamma = (_digamma_form(torch), lambda node: True)
    polygamma = (_polygamma_form(torch), _non_negative_order)
    zeta = (_zeta_form(torch), lambda node: True)
    # Export keeps torch.special's names as calls of their own.
    return rewrite_calls(
        exported,
        {
            ops.digamma.default: digamma,
            ops.special_digamma.default: digamma,
            ops.special_psi.default: digamma,
            ops.polygamma.default: polygamma,
            ops.special_polygamma.default: polygamma,
            ops.special_zeta.default: zeta,
            ops.special_zeta.self_scalar: zeta,
            ops.special_zeta.other_scalar: zeta,
        },
    )
