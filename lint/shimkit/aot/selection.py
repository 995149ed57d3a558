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
unspecified on CUDA). Calls along a larger or dynamic dim are left to the fallback: a
sort of them would be a fallback too, and a slower one.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import rewrite_calls

# The largest sort dim Inductor lowers to its own kernel (ir.Sort.create's persistent
# limit, max_rblock, in torch 2.11 and 2.13); beyond it, aten.sort is a fallback.
INDUCTOR_SORT_LIMIT = 512


def _sortable(shape: Any, dim: int) -> bool:
    """Whether Inductor sorts along `dim` of `shape` itself: a static size within its limit
    (a 0-dim input, which torch selects from as it is, stays a fallback)."""
    if not shape:
        return False
    size = shape[dim % len(shape)]
    return type(size) is int and size <= INDUCTOR_SORT_LIMIT


def _selected_dim(node: Any) -> int:
    if "dim" in node.kwargs:
        return int(node.kwargs["dim"])
    return int(node.args[2]) if len(node.args) > 2 else -1


def _topk(torch: ModuleType) -> Any:
    def topk(
        x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
    ) -> tuple[Any, Any]:
        if not _sortable(x.shape, dim):
            return NotImplemented
        values, indices = torch.sort(x, dim=dim, descending=largest, stable=True)
        return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)

    return topk


def _kthvalue(torch: ModuleType) -> Any:
    def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Any, Any]:
        if not _sortable(x.shape, dim):
            return NotImplemented
        values, indices = torch.sort(x, dim=dim, stable=True)
        value, index = values.narrow(dim, k - 1, 1), indices.narrow(dim, k - 1, 1)
        if not keepdim:
            value, index = value.squeeze(dim), index.squeeze(dim)
        return value, index

    return kthvalue


def selection_in_sort_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every topk and kthvalue along a static dim of at most
    INDUCTOR_SORT_LIMIT elements as a stable sort and a slice, how many calls were
    rewritten). For slim CUDA blobs only: on the CPU both ops have native shims."""
    aten = torch.ops.aten

    def call(node: Any) -> bool:
        return _sortable(node.args[0].meta["val"].shape, _selected_dim(node))

    return rewrite_calls(
        exported,
        {aten.topk.default: (_topk(torch), call), aten.kthvalue.default: (_kthvalue(torch), call)},
    )
