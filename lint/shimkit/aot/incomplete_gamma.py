"""The regularized incomplete gamma functions in series and continued-fraction form, for slim
CUDA blobs.

Inductor generates `igamma` and `igammac` on the CPU (its C++ prelude has ATen's
`calc_igamma`) but not in Triton: on CUDA it leaves them to a fallback, which no slim
runtime has, so compile refused a model with `torch.igamma` (the CDF of a Gamma, chi-square
or Poisson distribution, for one) for the slim CUDA target. For that target compile writes
`igamma`, `igammac` and torch.special's `gammainc` and `gammaincc` as elementwise ops (whose
kernels Inductor generates), choosing between the expansions where ATen's `calc_igamma` and
`calc_igammac` choose, except where the last one is used:

- P(a, x) by its power series, x^a e^-x / Gamma(a + 1) * (1 + x / (a + 1) + ...), where x <= 1
  or x <= a (igamma) or where ATen takes 1 - P for Q;
- Q(a, x) by Legendre's continued fraction, x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) /
  (x + 3 - a - ...)), where x > 1.1 and x >= a;
- Q(a, x) for x <= 1.1 and a small (ATen's `_igamc_helper_series`): 1 - x^a / Gamma(a + 1)
  - x^a / Gamma(a) * sum over n >= 1 of (-x)^n / (n! (a + n));
- P and Q by Temme's uniform asymptotic expansion (`shimkit.aot.gamma_asymptotic`) where
  a > 20 and x is within 30% of a. ATen uses it there too, for a up to 200, and beyond that
  only within 4.5 / sqrt(a) of a, looping up to 2000 terms of the series and the fraction
  elsewhere; those need terms in proportion to sqrt(a) near x = a, which a fixed number of
  terms does not cover, so here the expansion takes the whole band for every a > 20 (where ATen
  loses digits, at a = 1e6 and x = 0.995 a 4e-6, the expansion keeps float64's).

The series and the fraction are a fixed number of terms evaluated from the last term back
(Horner's rule for the series, the fraction from its tail up), so each term reads the one
before it once: the small-x series written out, the series and the fraction together in a
loop of TERMS_PER_STEP terms a step (`shimkit.aot.loop`; Inductor fuses a step into one
kernel). For a > 20 outside the band, x <= 0.7 a where the series is used, so its terms fall
at least as 0.7^n: 64 terms reach float32's precision and 112 float64's (for a <= 20, x near a
needs about 50).

The terms are computed in float32 for float16, bfloat16 and float32 input and in float64 for
float64, as ATen's CUDA kernels compute, the prefactor x^a e^-x / Gamma(a) and the small-x
series in float64 (a log x and lgamma(a) cancel where a is large); the result is cast to
torch's result type (integer input taken as the default floating-point type). The edge
values are ATen's, checked in ATen's order: NaN for a negative argument, P(0, x > 0) = 1,
P(a, 0) = 0, P(inf, x) = 0 (NaN at x = inf), P(a, inf) = 1, and their complements for Q; a
NaN that passes those checks makes the result NaN, as it does in ATen's expansions.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import computation_dtypes, rewrite_calls
from shimkit.aot.gamma_asymptotic import uniform_expansion
from shimkit.aot.loop import repeated

# Terms of the series and of the fraction, for float32 and for float64 terms (outside the
# uniform expansion's band their terms fall at least as 0.7^n), evaluated in a loop of steps
# of TERMS_PER_STEP terms each (written out, 128 terms of four calls took Inductor minutes to
# compile; one step a term, the loop's own cost is paid once a term).
FLOAT32_TERMS = 64
FLOAT64_TERMS = 112
TERMS_PER_STEP = 8
# The uniform expansion is used where a > UNIFORM_FROM and |x - a| < UNIFORM_BAND a.
UNIFORM_FROM, UNIFORM_BAND = 20, 0.3
# x <= 1.1 here, so term n is below 1.1^n / n!: 20 terms reach float64's precision.
SMALL_X_TERMS = 20


def _log_prefactor(torch: ModuleType, a: Any, x: Any) -> Any:
    """log(x^a e^-x / Gamma(a))."""
    return a * torch.log(x) - x - torch.lgamma(a)


def _terms_back(nested: Any, tail: Any, last: Any, a: Any, x: Any) -> tuple[Any, Any, Any]:
    """The series' and the fraction's next TERMS_PER_STEP terms, from term `last` back."""
    for j in range(TERMS_PER_STEP):
        n = last - j
        nested = 1 + nested * x / (a + n)
        tail = n * (n - a) / (x + (2 * n + 1) - a - tail)
    return nested, tail, last - TERMS_PER_STEP


def _series_and_fraction(torch: ModuleType, a: Any, x: Any) -> tuple[Any, Any]:
    """(P(a, x) by its power series (ATen's `_igam_helper_series`), Q(a, x) by Legendre's
    continued fraction (ATen's `_igammac_helper_continued_fraction` evaluates the same
    fraction forwards, until it converges)); the terms in the type of `a` and `x`, the
    prefactor in float64 (a log x and lgamma(a) cancel where a is large)."""
    terms = FLOAT64_TERMS if x.dtype == torch.float64 else FLOAT32_TERMS
    last = torch.full((), float(terms), dtype=x.dtype, device=x.device)
    nested, tail, _ = repeated(
        torch,
        _terms_back,
        terms // TERMS_PER_STEP,
        torch.ones_like(x),
        torch.zeros_like(x),
        last,
        reads=(a, x),
    )
    wide = _log_prefactor(torch, a.to(torch.float64), x.to(torch.float64))
    prefactor = torch.exp(wide).to(x.dtype)
    return prefactor * nested / a, prefactor / (x + 1 - a - tail)


def _small_x_q(torch: ModuleType, a: Any, x: Any) -> Any:
    """Q(a, x) for x <= 1.1 (ATen's `_igamc_helper_series`), in float64 (few terms)."""
    computed = x.dtype
    a, x = a.to(torch.float64), x.to(torch.float64)
    series = torch.zeros_like(x)
    for n in range(SMALL_X_TERMS, 0, -1):
        series = (series + 1 / (math.factorial(n) * (a + n))) * -x
    log_x = torch.log(x)
    head = -torch.expm1(a * log_x - torch.lgamma(a + 1))
    return (head - torch.exp(a * log_x - torch.lgamma(a)) * series).to(computed)


def _q_by_regions(torch: ModuleType, a: Any, x: Any, p: Any, fraction: Any) -> Any:
    """Q(a, x) for a, x > 0 and finite, by the expansion ATen's `calc_igammac` picks (`p`,
    `fraction`: P by the series, Q by the fraction)."""
    # Where x <= 1.1, ATen takes 1 - P when a is large enough for it to be accurate.
    small_x = torch.where(x <= 0.5, -0.4 / torch.log(x) < a, x * 1.1 < a)
    large_x = torch.where(x < a, 1 - p, fraction)
    return torch.where(x > 1.1, large_x, torch.where(small_x, 1 - p, _small_x_q(torch, a, x)))


def _uniform(a: Any, x: Any) -> Any:
    """Where the uniform asymptotic expansion is used: a > 20 and x within 30% of a (ATen
    narrows the band to 4.5 / sqrt(a) for a > 200, where it loops up to 2000 terms)."""
    return (a > UNIFORM_FROM) & ((x - a).abs() < UNIFORM_BAND * a)


def _regularized(torch: ModuleType, a: Any, x: Any, upper: bool) -> Any:
    """P(a, x), or Q(a, x) where `upper`, with ATen's edge values."""
    p, fraction = _series_and_fraction(torch, a, x)
    q = _q_by_regions(torch, a, x, p, fraction)
    # igamma: ATen's calc_igamma takes 1 - Q where x > 1 and x > a.
    value = q if upper else torch.where((x > 1) & (x > a), 1 - q, p)
    # (condition, P there, Q there), the first that holds wins, as ATen checks them.
    edges = (
        ((x < 0) | (a < 0), math.nan, math.nan),
        (a == 0, torch.where(x > 0, 1.0, math.nan), torch.where(x > 0, 0.0, math.nan)),
        (x == 0, 0.0, 1.0),
        (a.isinf(), torch.where(x.isinf(), math.nan, 0.0), torch.where(x.isinf(), math.nan, 1.0)),
        (x.isinf(), 1.0, 0.0),
    )
    uniform_p, uniform_q = uniform_expansion(torch, a, x)
    value = torch.where(_uniform(a, x), uniform_q if upper else uniform_p, value)
    for condition, at_p, at_q in reversed(edges):
        value = torch.where(condition, at_q if upper else at_p, value)
    return value


def _form(torch: ModuleType, upper: bool) -> Any:
    def incomplete_gamma(a: Any, x: Any) -> Any:
        computed, result = computation_dtypes(torch, torch.result_type(a, x))
        a, x = torch.broadcast_tensors(a.to(computed), x.to(computed))
        return _regularized(torch, a, x, upper).to(result)

    return incomplete_gamma


def incomplete_gammas_in_series_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every igamma, igammac, special.gammainc and special.gammaincc in its
    series and continued-fraction form, how many calls were rewritten)."""
    ops = torch.ops.aten
    lower = (_form(torch, upper=False), lambda node: True)
    upper = (_form(torch, upper=True), lambda node: True)
    # Export keeps torch.special's names as calls of their own.
    return rewrite_calls(
        exported,
        {
            ops.igamma.default: lower,
            ops.special_gammainc.default: lower,
            ops.igammac.default: upper,
            ops.special_gammaincc.default: upper,
        },
        in_place={
            ops.igamma_.default: ops.igamma.default,
            ops.igammac_.default: ops.igammac.default,
        },
    )
