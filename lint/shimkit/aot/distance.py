"""Pairwise distances (cdist, pdist) computed directly, for slim CUDA blobs.

`torch.cdist` computes Euclidean distances of many points from dot products (a matrix
product Inductor hands to cuBLAS); every other call, of any p or of at most 25 points on
each side, reaches the `_cdist_forward` fallback, and `F.pdist` the `_pdist_forward` one.
The slim CUDA shims run both on the host: a round trip per call, and a run that cannot be
captured whole in a CUDA graph. For a slim CUDA target compile rewrites such calls into
the differences of every pair of rows reduced along the feature dim, as ATen's direct
kernels reduce them: p = 0 counts the differing features, p = 1 sums their magnitudes, p = 2
is the square root of the summed squares, p = inf their largest magnitude, any other p the
p-th root of the summed p-th powers; pdist takes the pairs i < j of a cdist of the input
with itself, in ATen's order. The differences are materialized, so calls whose pairwise
tensor would exceed `DENSE_LIMIT` elements (or has a dynamic size, or no features) keep the
fallback.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import DENSE_LIMIT, argument, input_shape, rewrite_calls, static_numel

# ATen's cdist takes dot products for p = 2 beyond this many rows on either side.
EUCLID_MM_THRESHOLD = 25


def _pairwise_numel(x1: tuple[Any, ...] | None, x2: tuple[Any, ...] | None) -> int | None:
    """Elements of x1's and x2's differences, [..., P, R, M] (None when dynamic)."""
    if static_numel(x1) is None or static_numel(x2) is None or len(x1) < 2 or len(x2) < 2:
        return None
    batch1, batch2 = x1[:-2], x2[:-2]
    rank = max(len(batch1), len(batch2))
    batch1 = (1,) * (rank - len(batch1)) + batch1
    batch2 = (1,) * (rank - len(batch2)) + batch2
    batch = tuple(max(a, b) for a, b in zip(batch1, batch2, strict=True))
    return static_numel((*batch, x1[-2], x2[-2], x1[-1]))


def _reduced(diff: Any, p: float) -> Any:
    """The p-norms of `diff`'s magnitudes along its last dim, as ATen's direct kernels."""
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return diff.square().sum(-1).sqrt()
    if math.isinf(p):
        return diff.amax(-1)
    return diff.pow(p).sum(-1).pow(1.0 / p)


def _takes_dot_products(p: float, rows1: Any, rows2: Any, compute_mode: int | None) -> bool:
    """Whether ATen's cdist computes this call from dot products (no fallback)."""
    mode = compute_mode or 0
    by_size = rows1 > EUCLID_MM_THRESHOLD or rows2 > EUCLID_MM_THRESHOLD
    return p == 2 and (mode == 1 or (mode == 0 and by_size))


def _cdist_applies(x1: Any, x2: Any, p: float, compute_mode: int | None) -> bool:
    numel = _pairwise_numel(x1, x2)
    if numel is None or numel > DENSE_LIMIT or x1[-1] == 0:
        return False
    return not _takes_dot_products(p, x1[-2], x2[-2], compute_mode)


def _cdist(torch: ModuleType) -> Any:
    def cdist(x1: Any, x2: Any, p: float = 2.0, compute_mode: int | None = None) -> Any:
        if not _cdist_applies(tuple(x1.shape), tuple(x2.shape), p, compute_mode):
            return NotImplemented
        return _reduced((x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs(), p)  # [..., P, R, M]

    return cdist


def _pdist(torch: ModuleType) -> Any:
    def pdist(x: Any, p: float = 2.0) -> Any:
        if not _pdist_applies(tuple(x.shape)):
            return NotImplemented
        n = x.shape[0]
        pairs = torch.triu_indices(n, n, offset=1, device=x.device)
        return _reduced((x[pairs[0]] - x[pairs[1]]).abs(), p)

    return pdist


def _pdist_applies(x: tuple[Any, ...] | None) -> bool:
    numel = static_numel(x)
    if numel is None or len(x) != 2 or x[1] == 0 or x[0] < 2:
        return False
    return x[0] * (x[0] - 1) // 2 * x[1] <= DENSE_LIMIT


def distances_in_direct_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every cdist that would reach the `_cdist_forward` fallback, and
    every pdist, computed directly where the pairwise differences fit DENSE_LIMIT, how many
    calls were rewritten). For slim CUDA blobs only: the slim CPU shims compute both."""
    aten = torch.ops.aten

    def cdist_call(node: Any) -> bool:
        p = float(argument(node, 2, "p", 2.0))
        mode = argument(node, 3, "compute_mode", None)
        return _cdist_applies(input_shape(node, 0), input_shape(node, 1), p, mode)

    return rewrite_calls(
        exported,
        {
            aten.cdist.default: (_cdist(torch), cdist_call),
            aten.pdist.default: (_pdist(torch), lambda node: _pdist_applies(input_shape(node))),
        },
    )
