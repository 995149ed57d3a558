"""Embedding bags (sum and mean) as a lookup and a segment sum, for slim CUDA blobs.

`nn.EmbeddingBag` exports `aten.embedding_bag`, which Inductor leaves to the
`_embedding_bag` fallback. The slim CUDA shims run it on the host (shims/cuda/
shim_host_ops_cuda.cpp): a round trip per call, and a run that cannot be captured whole in
a CUDA graph. For a slim CUDA target compile rewrites sum and mean bags over float32 or
float64 weights into ops Inductor generates on the GPU: the rows looked up (times the
per-sample weights), rows at `padding_idx` zeroed and not counted, each index's bag found by
a cumulative sum over the bag starts (empty bags and trailing offsets included), and the
rows index-added into their bags; a mean divides by the rows counted (an empty bag is zero,
as in ATen). Only the pooled output may be used: a program that reads the op's other
outputs, or has a max bag or half-precision weights, keeps the fallback for all its bags.
The sums are atomic adds on the GPU, so their order, and the last bits of a float sum, can
differ from ATen's.
"""

from __future__ import annotations

import operator
from types import ModuleType
from typing import Any

SUM, MEAN = 0, 1


def _bag(torch: ModuleType) -> Any:
    def embedding_bag(
        weight: Any,
        indices: Any,
        offsets: Any,
        scale_grad_by_freq: bool = False,
        mode: int = SUM,
        sparse: bool = False,
        per_sample_weights: Any = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> Any:
        if mode not in (SUM, MEAN) or weight.dtype not in (torch.float32, torch.float64):
            return NotImplemented
        if indices.dim() == 2:  # fixed-length bags, one per row
            bags, length = indices.shape
            starts = torch.arange(bags, device=indices.device) * length
            indices = indices.reshape(-1)
            if per_sample_weights is not None:
                per_sample_weights = per_sample_weights.reshape(-1)
        else:
            bags = offsets.shape[0] - (1 if include_last_offset else 0)
            starts = offsets[:bags]
        n = indices.shape[0]
        # Bag of each index: how many bags start at or before it, less one. Counted in int32:
        # Inductor adds int64 atomically only through the index_put fallback.
        marks = torch.zeros(n + 1, dtype=torch.int32, device=indices.device)
        ones = torch.ones(starts.shape, dtype=torch.int32, device=indices.device)
        marks = marks.index_add(0, starts, ones)
        bag_of = torch.cumsum(marks, 0, dtype=torch.int32)[:n] - 1
        rows = weight[indices]
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
        counted = torch.ones_like(indices, dtype=torch.bool)
        if padding_idx is not None and padding_idx >= 0:
            counted = indices != padding_idx
            rows = torch.where(counted.unsqueeze(1), rows, torch.zeros_like(rows))
        pooled = torch.zeros((bags, weight.shape[1]), dtype=weight.dtype, device=weight.device)
        pooled = pooled.index_add(0, bag_of, rows)
        bag_size = torch.zeros(bags, dtype=torch.int32, device=indices.device)
        bag_size = bag_size.index_add(0, bag_of, counted.to(torch.int32))
        if mode == MEAN:
            pooled = pooled / bag_size.clamp(min=1).unsqueeze(1).to(pooled.dtype)
        # Only the pooled output is read (embedding_bag_in_math_form checks); the others stand
        # in for ATen's offset2bag, bag sizes and max indices, in their dtypes.
        bag_size = bag_size.to(torch.int64)
        return pooled, bag_of.to(torch.int64), bag_size, torch.zeros_like(bag_size)

    return embedding_bag


def _only_pooled_output_used(node: Any) -> bool:
    return all(
        user.op == "call_function"
        and user.target is operator.getitem
        and (user.args[1] == 0 or not user.users)
        for user in node.users
    )


def _rewritable(torch: ModuleType, node: Any) -> bool:
    mode = node.kwargs.get("mode", node.args[4] if len(node.args) > 4 else SUM)
    weight = node.args[0].meta["val"]
    return (
        mode in (SUM, MEAN)
        and weight.dtype in (torch.float32, torch.float64)
        and _only_pooled_output_used(node)
    )


def embedding_bag_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every sum or mean embedding bag whose pooled output alone is read
    as a lookup and a segment sum, how many calls were rewritten). For slim CUDA blobs
    only: the slim CPU shims serve the op natively."""
    aten = torch.ops.aten
    bag = _bag(torch)
    table = {aten.embedding_bag.default: bag, aten.embedding_bag.padding_idx: bag}
    calls = [
        node for node in exported.graph.nodes if node.op == "call_function" and node.target in table
    ]
    # The table rewrites every call of the op, so one that must keep the fallback keeps it
    # for all.
    if not calls or not all(_rewritable(torch, node) for node in calls):
        return exported, 0
    return exported.run_decompositions(table), len(calls)
