"""Digamma and trigamma in their series form, for slim CUDA blobs.

Inductor generates `digamma` and `polygamma` on the CPU (its C++ prelude has them) but not
in Triton: on CUDA it leaves them to libtorch's proxy executor, which no slim runtime has,
so compile refused a model with `torch.digamma` (the entropy or KL divergence of a Beta,
Gamma or Dirichlet distribution, for one) for the slim CUDA target. For that target compile
writes `digamma` and `polygamma` of order 0 and 1 (and torch.special's `digamma`, `psi` and
`polygamma`) in ATen's own series, elementwise ops Inductor fuses into one kernel:

- digamma (ATen's `calc_digamma`): a negative x reflected to 1 - x with -pi / tan(pi * r)
  (r the fractional part of x), then the recurrence psi(x) = psi(x + 1) - 1 / x until x
  reaches 10 (at most ten steps, unrolled; step k takes x + k where ATen adds 1 at each),
  then the asymptotic series (or psi(10) exactly where x lands on 10). +-0 gives -+inf and
  a negative integer NaN, as ATen gives them.
- trigamma (ATen's `trigamma`): x below 1/2 reflected with pi^2 / sin^2(pi x), six steps of
  the recurrence, then its asymptotic series.

Both run in float32 for float16, bfloat16 and float32 input and in float64 for float64, as
ATen's CUDA kernels do (tests/aot/test_polygamma_series_form.py: within a few float32 ulps
of ATen). Integer input is taken as float32, as torch promotes it. Orders above 1 keep the
call (compile names it for the slim CUDA target).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import rewrite_calls

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
    if x.dtype == torch.float64:
        return x, x.dtype
    result = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    return x.to(torch.float32), result


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


def _polygamma_form(torch: ModuleType) -> Any:
    def polygamma(n: int, x: Any) -> Any:
        if n not in (0, 1):
            return NotImplemented
        computed, result = _computed_in(torch, x)
        series = _digamma if n == 0 else _trigamma
        return series(torch, computed).to(result)

    return polygamma


def _low_order(node: Any) -> bool:
    return node.args[0] in (0, 1)


def polygammas_in_series_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every digamma, and every polygamma of order 0 or 1, in its series
    form, how many calls were rewritten)."""
    ops = torch.ops.aten
    digamma = (_digamma_form(torch), lambda node: True)
    polygamma = (_polygamma_form(torch), _low_order)
    # Export keeps torch.special's names as calls of their own.
    return rewrite_calls(
        exported,
        {
            ops.digamma.default: digamma,
            ops.special_digamma.default: digamma,
            ops.special_psi.default: digamma,
            ops.polygamma.default: polygamma,
            ops.special_polygamma.default: polygamma,
        },
    )
