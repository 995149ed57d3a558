"""Temme's uniform asymptotic expansion of the regularized incomplete gamma functions, for
shimkit.aot.incomplete_gamma where a is large and x near a (DLMF 8.12.3-8.12.10):

    Q(a, x) = erfc(eta sqrt(a / 2)) / 2 + R,    P(a, x) = erfc(-eta sqrt(a / 2)) / 2 - R,
    R = exp(-a eta^2 / 2) / sqrt(2 pi a) * sum over k of c_k(eta) a^-k,

where eta^2 / 2 = lambda - 1 - log(lambda), lambda = x / a, eta of the sign of lambda - 1.
There the series and the continued fraction need terms in proportion to sqrt(a) (ATen loops
up to 2000 of them, and still loses digits at a = 1e6); this expansion's terms fall like a^-k.
Each c_k is a power series in eta, c_0 = 1 / (lambda - 1) - 1 / eta and c_k = c_{k-1}' / eta
+ (-1)^k g_k / (lambda - 1), g_k being Stirling's coefficients of Gamma (DLMF 5.11.3). The
coefficients are derived here, exactly in fractions, from those definitions (ATen's
`_igam_helper_asymptotic_series` has the same numbers in a table of 25 x 25).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from types import ModuleType
from typing import Any

# (orders of 1/a, powers of eta in each c_k) for float32 and for float64 terms, enough where
# compile uses the expansion (a > 20, |x - a| <= 0.3 a: |eta| < 0.35): the parts left out
# are below the type's precision (tests/aot/test_incomplete_gamma_form.py).
FLOAT32_TERMS = (5, 9)
FLOAT64_TERMS = (10, 16)


def _inverse(series: list[Fraction]) -> list[Fraction]:
    """1 / series, as a power series of the same length (series[0] != 0)."""
    inverse = [1 / series[0]]
    for n in range(1, len(series)):
        inverse.append(-sum(series[i] * inverse[n - i] for i in range(1, n + 1)) / series[0])
    return inverse


def _times(left: list[Fraction], right: list[Fraction]) -> list[Fraction]:
    """left * right, truncated to the length of `left`."""
    return [sum(left[i] * right[n - i] for i in range(n + 1)) for n in range(len(left))]


def _lambda_minus_one_over_eta(length: int) -> list[Fraction]:
    """(lambda - 1) / eta as a power series in eta. With u = lambda - 1, eta = u h(u) where
    h(u)^2 = 2 (u - log(1 + u)) / u^2 = sum over m >= 2 of 2 (-u)^(m - 2) / m; inverted by
    Lagrange's formula: the coefficient of eta^n in u is that of u^(n - 1) in h(u)^-n, over n."""
    squared = [Fraction(2 * (-1) ** m, m) for m in range(2, length + 2)]
    root = [Fraction(1)]
    for n in range(1, length):
        root.append((squared[n] - sum(root[i] * root[n - i] for i in range(1, n))) / 2)
    over_root = _inverse(root)
    power, coefficients = [Fraction(1)] + [Fraction(0)] * (length - 1), []
    for n in range(1, length + 1):
        power = _times(power, over_root)
        coefficients.append(power[n - 1] / n)
    return coefficients


def _stirling(count: int) -> list[Fraction]:
    """g_0 .. g_{count-1}: Gamma(z) ~ e^-z z^z sqrt(2 pi / z) sum of g_k z^-k, the exponential
    of Stirling's series sum over m of B_2m / (2m (2m - 1) z^(2m - 1))."""
    bernoulli = [Fraction(1)]
    for m in range(1, count + 1):
        bernoulli.append(-sum(math.comb(m + 1, j) * bernoulli[j] for j in range(m)) / (m + 1))
    log = [Fraction(0)] * count
    for m in range(1, count // 2 + 1):
        log[2 * m - 1] = bernoulli[2 * m] / (2 * m * (2 * m - 1))
    stirling = [Fraction(1)]
    for n in range(1, count):  # g' = log' g
        stirling.append(sum(i * log[i] * stirling[n - i] for i in range(1, n + 1)) / n)
    return stirling


@functools.cache
def coefficients(orders: int, powers: int) -> tuple[tuple[float, ...], ...]:
    """The coefficients of eta^n in c_k(eta), for k < orders and n < powers."""
    length = powers + 2 * orders + 1  # each c_k is c_{k-1}' / eta plus a series: two fewer
    over_u = _inverse(_lambda_minus_one_over_eta(length))  # eta / (lambda - 1)
    stirling = _stirling(orders)
    c = over_u[1:]  # c_0 = (eta / (lambda - 1) - 1) / eta
    rows = [c[:powers]]
    for k in range(1, orders):
        g = (-1) ** k * stirling[k]
        # c_{k-1}' / eta and g / (lambda - 1) both have a pole at eta = 0; they cancel.
        assert c[1] + g * over_u[0] == 0
        c = [(m + 2) * c[m + 2] + g * over_u[m + 1] for m in range(len(c) - 2)]
        rows.append(c[:powers])
    return tuple(tuple(float(value) for value in row) for row in rows)


def uniform_expansion(torch: ModuleType, a: Any, x: Any) -> tuple[Any, Any]:
    """(P(a, x), Q(a, x)) by the expansion, in the type of `a` and `x`: eta, the error
    function and the exponential in float64 (a eta^2 / 2 is a difference of large numbers
    where a is large), the sum of the c_k in the terms' type."""
    orders, powers = FLOAT64_TERMS if x.dtype == torch.float64 else FLOAT32_TERMS
    wide_a = a.to(torch.float64)
    sigma = x.to(torch.float64) / wide_a - 1
    # (sigma - log1p(sigma)) >= 0; its rounding may not be.
    eta = torch.sign(sigma) * torch.sqrt(2 * (sigma - torch.log1p(sigma)).clamp_min(0))
    narrow_eta, over_a = eta.to(x.dtype), 1 / a
    total = torch.zeros_like(x)
    for row in reversed(coefficients(orders, powers)):
        c_k = torch.zeros_like(x)
        for value in reversed(row):
            c_k = c_k * narrow_eta + value
        total = total * over_a + c_k
    remainder = torch.exp(-0.5 * wide_a * eta * eta) / torch.sqrt(2 * math.pi * wide_a)
    remainder = remainder * total.to(torch.float64)
    scaled = eta * torch.sqrt(wide_a / 2)
    return (
        (0.5 * torch.erfc(-scaled) - remainder).to(x.dtype),
        (0.5 * torch.erfc(scaled) + remainder).to(x.dtype),
    )
