"""Top-k and k-th value selection as a stable sort and a slice, for slim CUDA blobs.

`torch.topk` and `torch.kthvalue` are fallbacks on CUDA: Inductor calls their C shims,
which the slim CUDA shims serve on the host (copy in, select, copy out; shims/cuda/
shim_host_ops_cuda.cpp). A host step costs a round trip per call and keeps the run from
being captured whole in a CUDA graph, so a mixture-of-experts router (top-2 of 8 experts)
paid more for its routing than for its experts. A sort along a dim of at most
`INDUCTOR_SORT_LIMIT` elements is one Inductor generates itself on CUDA (a persistent
Triton bitonic sort, `ir.Sort`), so compile rewrites such calls for the slim CUDA target:
topk(x, k) is the first k of a stable sort, descending for the largest; kthvalue(x, k) is
element k - 1 of a stable ascending sort. Values are torch's, NaN sorting as the largest
as in ATen; among equal values the lowest index comes first (torch leaves that order
unspecified on CUDA). Along a longer static dim (a top-k over a vocabulary), with k at
most `CHUNKED_K_LIMIT`, the selection runs in rounds: the dim is cut into chunks of
INDUCTOR_SORT_LIMIT (the last padded with values that sort after every real one: -inf for
the largest, NaN for the smallest, the dtype's extreme for integers), each chunk's first k
of a stable sort are kept with their indices, in chunk order, until the candidates fit one
sort. The first k by (value, then index) of the whole dim are among each chunk's first k,
so values and indices are those of one stable sort. A larger k along such a dim takes the
first k of the whole dim's merge sort (`shimkit.aot.merge_sort`). Calls along a dynamic dim
are left to the fallback.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import argument, rewrite_calls
from shimkit.aot.merge_sort import INDUCTOR_SORT_LIMIT, in_chunks, long_static_dim, stable_sort

# The largest k selected in rounds along a longer dim: each round keeps at most half of a
# chunk, so the candidates shrink at least by half a round.
CHUNKED_K_LIMIT = INDUCTOR_SORT_LIMIT // 2


def _sortable(shape: Any, dim: int) -> bool:
    """Whether Inductor sorts along `dim` of `shape` itself: a static size within its limit
    (a 0-dim input, which torch selects from as it is, stays a fallback)."""
    if not shape:
        return False
    size = shape[dim % len(shape)]
    return type(size) is int and size <= INDUCTOR_SORT_LIMIT


def _selectable(shape: Any, dim: int, k: int) -> bool:
    """Whether a selection of the first `k` along `dim` of `shape` has a sort form: a dim
    Inductor sorts, or a longer static one (in rounds for k <= CHUNKED_K_LIMIT, else a
    merge sort of the whole dim)."""
    return _sortable(shape, dim) or (long_static_dim(shape, dim) and k > 0)


def _sorts_last(torch: ModuleType, dtype: Any, descending: bool) -> Any:
    """A value a stable sort puts after every real one of `dtype` (ties: after, by index)."""
    if dtype.is_floating_point:
        return float("-inf") if descending else float("nan")
    if dtype == torch.bool:
        return not descending
    info = torch.iinfo(dtype)
    return info.min if descending else info.max


def _first_k(torch: ModuleType, x: Any, k: int, dim: int, descending: bool) -> tuple[Any, Any]:
    """The first k along `dim` of a stable sort of `x` (values, indices), in rounds of
    chunks Inductor sorts when the dim is longer than INDUCTOR_SORT_LIMIT."""
    if _sortable(x.shape, dim) or k > CHUNKED_K_LIMIT:
        values, indices = stable_sort(torch, x, dim, descending)
        return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)
    values = x.movedim(dim, -1)
    indices = torch.arange(values.shape[-1], device=x.device).expand(values.shape)
    while values.shape[-1] > INDUCTOR_SORT_LIMIT:
        chunks = -(-values.shape[-1] // INDUCTOR_SORT_LIMIT)
        values = in_chunks(torch, values, chunks, _sorts_last(torch, x.dtype, descending))
        kept, order = torch.sort(values, dim=-1, descending=descending, stable=True)
        kept, order = kept[..., :k], order[..., :k]
        indices = in_chunks(torch, indices, chunks, 0).gather(-1, order)
        values, indices = kept.flatten(-2), indices.flatten(-2)
    values, order = torch.sort(values, dim=-1, descending=descending, stable=True)
    values, indices = values[..., :k], indices.gather(-1, order[..., :k])
    return values.movedim(-1, dim), indices.movedim(-1, dim)


def _topk(torch: ModuleType) -> Any:
    def topk(
        x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
    ) -> tuple[Any, Any]:
        if not _selectable(x.shape, dim, k):
            return NotImplemented
        return _first_k(torch, x, k, dim, descending=largest)

    return topk


def _kthvalue(torch: ModuleType) -> Any:
    def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Any, Any]:
        if not _selectable(x.shape, dim, k):
            return NotImplemented
        values, indices = _first_k(torch, x, k, dim, descending=False)
        value, index = values.narrow(dim, k - 1, 1), indices.narrow(dim, k - 1, 1)
        if not keepdim:
            value, index = value.squeeze(dim), index.squeeze(dim)
        return value, index

    return kthvalue


def selection_in_sort_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every topk and kthvalue along a static dim as a stable sort and a
    slice (beyond INDUCTOR_SORT_LIMIT elements in rounds for k <= CHUNKED_K_LIMIT, else of a
    merge sort), how many calls were rewritten). For slim CUDA blobs only: on the CPU both
    ops have native shims."""
    aten = torch.ops.aten

    def call(node: Any) -> bool:
        return _selectable(
            node.args[0].meta["val"].shape, int(argument(node, 2, "dim", -1)), int(node.args[1])
        )

    return rewrite_calls(
        exported,
        {aten.topk.default: (_topk(torch), call), aten.kthvalue.default: (_kthvalue(torch), call)},
    )
