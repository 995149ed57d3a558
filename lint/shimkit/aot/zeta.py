"""Hurwitz's zeta function in ATen's series, for the slim CUDA target's series forms.

ATen's `zeta(x, q)` (Cephes' algorithm, which `torch.special.zeta` and `torch.polygamma` of
order 2 and above use) sums (q + k)^-x for k = 0..9, stops there if the last term is below
2^-53 of the sum, and otherwise adds the Euler-Maclaurin correction from w = q + 9: the last
term times w / (x - 1), less its half, then twelve terms with the Bernoulli numbers'
(2k)! / B_2k. `hurwitz_zeta` is that arithmetic as elementwise tensor ops, which Inductor
fuses into one kernel, with two differences:

- ATen also stops inside the correction, once a term falls below 2^-53 of the sum. The form
  adds all twelve: in float32 such terms round away, in float64 they move the sum by an ulp
  or two.
- For negative q (defined for integer x only) ATen goes on summing until q + k passes 9, a
  count that depends on the data. The form takes the same terms regrouped: with r = q -
  floor(q), those of negative base are (-1)^x times the terms of zeta(x, 1 - r) that
  zeta(x, 1 - q) lacks, so zeta(x, q) = [zeta(x, r) + (-1)^x zeta(x, 1 - r)] - (-1)^x
  zeta(x, 1 - q), the bracket added term by term (where r is near 1/2 its terms cancel in
  pairs, as ATen's do in its sum).

ATen's special values are kept: x = 1 gives inf, x < 1 NaN, q a non-positive integer inf,
and a negative non-integer q with a non-integer x NaN.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

# ATen's zeta: (2k)! / B_2k for k = 1..12, the Euler-Maclaurin coefficients.
EULER_MACLAURIN = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
# Terms summed directly after q^-x, before the correction.
DIRECT_TERMS = 9
# ATen's stopping threshold: 2^-53, also in float32.
MACHEP = 1.11022302462515654042e-16


def _in_order(terms: list[Any]) -> Any:
    """The terms' sum, added first to last as ATen adds them."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _zeta_terms(torch: ModuleType, x: Any, q: Any) -> tuple[list[Any], Any]:
    """ATen's terms of zeta(x, q) for q > 0 (any q where they are not used), in the order it
    adds them (the correction's 0 where ATen stops before it), and their sum in that order."""
    # Each term from q, not chained (a chain read twice per step makes Inductor's lowering
    # walk it exponentially; see shimkit.aot.polygamma).
    direct = [torch.pow(q + k, -x) for k in range(DIRECT_TERMS + 1)]
    last, total = direct[-1], _in_order(direct)
    # The terms fall with k (q > 0, x > 1), so ATen stops at some k if and only if at the last.
    stops = (-MACHEP * total < last) & (last < MACHEP * total)
    w = q + DIRECT_TERMS
    correction = [last * w / (x - 1), -0.5 * last]
    # last * x (x + 1) ... (x + 2k) / w^(2k + 1), a factor at a time (ATen keeps the rising
    # product and the power apart; in float32 the product overflows where the power
    # underflows, inf * 0, for large x).
    term = last
    for k, coefficient in enumerate(EULER_MACLAURIN):
        term = term * (x + 2 * k) / w
        correction.append(term / coefficient)
        term = term * (x + 2 * k + 1) / w
    correction = [torch.where(stops, 0.0, term) for term in correction]
    # The direct terms' sum, already taken for the stop test, then the correction's terms.
    return direct + correction, _in_order([total, *correction])


def hurwitz_zeta(torch: ModuleType, x: Any, q: Any) -> Any:
    """ATen's zeta(x, q), elementwise, for x and q of one floating-point dtype (the one ATen
    computes in) and broadcastable shapes."""
    x, q = torch.broadcast_tensors(x, q)
    negative = q < 0
    fraction = q - torch.floor(q)
    sign = torch.where(torch.remainder(x, 2) == 1, -1.0, 1.0)  # (-1)^x for an integer x
    # q's own terms, or where q is negative r's (module docstring). The other two sums are
    # taken at 1 where q is not negative, and not used there: q's sign is data, so the
    # kernel holds all three series (elementwise arithmetic in one fused kernel).
    near, near_sum = _zeta_terms(torch, x, torch.where(negative, fraction, q))
    mirrored, _ = _zeta_terms(torch, x, torch.where(negative, (torch.floor(q) + 1) - q, 1.0))
    _, far = _zeta_terms(torch, x, torch.where(negative, 1 - q, 1.0))
    paired = _in_order([a + sign * b for a, b in zip(near, mirrored, strict=True)])
    result = torch.where(negative, paired - sign * far, near_sum)
    # x = inf: a negative q's terms include one of base in (-1, 0), inf, as in ATen's sum.
    result = torch.where(negative & (x == math.inf), math.inf, result)
    non_positive = q <= 0
    result = torch.where(non_positive & (x != torch.floor(x)), math.nan, result)
    result = torch.where(non_positive & (q == torch.floor(q)), math.inf, result)
    result = torch.where(x < 1, math.nan, result)
    return torch.where(x == 1, math.inf, result)
