"""Embedding bags (sum, mean and max) as a lookup and a segment reduction, for slim CUDA blobs.

`nn.EmbeddingBag` exports `aten.embedding_bag`, which Inductor leaves to the
`_embedding_bag` fallback. The slim CUDA shims run it on the host (shims/cuda/
shim_host_ops_cuda.cpp): a round trip per call, and a run that cannot be captured whole in
a CUDA graph. For a slim CUDA target compile rewrites sum, mean and max bags over float32,
float64, float16 or bfloat16 weights into ops Inductor generates on the GPU. Sum and mean:
the rows looked up (times the per-sample weights), rows at `padding_idx` zeroed and not
counted, each index's bag found by a cumulative sum over the bag starts (empty bags and
trailing offsets included), and the rows index-added into their bags; a mean divides by the
rows counted (an empty bag is zero, as in ATen); half-precision rows are summed in float32
and rounded once, as ATen's CUDA kernel does. Max: the largest counted row per column (an
empty bag, or one of padding only, is zero, as in ATen); fixed-length bags (`nn.EmbeddingBag`
exports a 2-D input as flattened indices and an arange of row starts, which compile
recognises and hands to the form as the 2-D indices) as one reduction per bag, bags given by
offsets as a dense comparison of every bag with every row, which must fit `DENSE_LIMIT`
elements (bags x indices x columns, static sizes). Only the pooled output may be used: a
program that reads the op's other outputs, or has a max bag the form does not take, keeps
the fallback for all its bags. The sums are atomic adds on the GPU, so their order, and the
last bits of a float sum, can differ from ATen's; a max over a NaN is NaN here, where ATen's
kernels keep the first row's value past a NaN.
"""

from __future__ import annotations

import operator
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import DENSE_LIMIT, argument, input_shape, static_numel

SUM, MEAN, MAX = 0, 1, 2


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
        if mode not in (SUM, MEAN, MAX) or weight.dtype not in _weight_dtypes(torch):
            return NotImplemented
        fixed_length = indices.dim() == 2  # one bag per row
        if fixed_length:
            bags, length = indices.shape
            starts = torch.arange(bags, device=indices.device) * length
            indices = indices.reshape(-1)
            if per_sample_weights is not None:
                per_sample_weights = per_sample_weights.reshape(-1)
        else:
            bags = offsets.shape[0] - (1 if include_last_offset else 0)
            starts = offsets[:bags]
        n = indices.shape[0]
        if mode == MAX and not fixed_length and bags * n * weight.shape[1] > DENSE_LIMIT:
            return NotImplemented
        # Bag of each index: how many bags start at or before it, less one. Counted in int32:
        # Inductor adds int64 atomically only through the index_put fallback.
        marks = torch.zeros(n + 1, dtype=torch.int32, device=indices.device)
        ones = torch.ones(starts.shape, dtype=torch.int32, device=indices.device)
        marks = marks.index_add(0, starts, ones)
        bag_of = torch.cumsum(marks, 0, dtype=torch.int32)[:n] - 1
        rows = weight[indices]
        if mode != MAX and weight.dtype in (torch.float16, torch.bfloat16):
            rows = rows.float()  # summed in float32 and rounded once, as ATen's CUDA kernel does
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
        padded = padding_idx is not None and padding_idx >= 0
        counted = indices != padding_idx if padded else torch.ones_like(indices, dtype=torch.bool)
        bag_size = torch.zeros(bags, dtype=torch.int32, device=indices.device)
        bag_size = bag_size.index_add(0, bag_of, counted.to(torch.int32))
        if mode == MAX:
            pooled = _largest_rows(torch, rows, counted, bag_of, bags, fixed_length)
            pooled = torch.where(bag_size.unsqueeze(1) > 0, pooled, torch.zeros_like(pooled))
        else:
            if padded:
                rows = torch.where(counted.unsqueeze(1), rows, torch.zeros_like(rows))
            pooled = torch.zeros((bags, weight.shape[1]), dtype=rows.dtype, device=weight.device)
            pooled = pooled.index_add(0, bag_of, rows)
        if mode == MEAN:
            pooled = pooled / bag_size.clamp(min=1).unsqueeze(1).to(pooled.dtype)
        pooled = pooled.to(weight.dtype)
        # Only the pooled output is read (embedding_bag_in_math_form checks); the others stand
        # in for ATen's offset2bag, bag sizes and max indices, in their dtypes.
        bag_size = bag_size.to(torch.int64)
        return pooled, bag_of.to(torch.int64), bag_size, torch.zeros_like(bag_size)

    return embedding_bag


def _largest_rows(
    torch: ModuleType, rows: Any, counted: Any, bag_of: Any, bags: Any, fixed_length: bool
) -> Any:
    """Each bag's largest counted row value per column (-inf for a bag with none)."""
    lowest = torch.full_like(rows, float("-inf"))
    rows = torch.where(counted.unsqueeze(1), rows, lowest)
    if fixed_length:  # the bags are consecutive runs of equal length
        return rows.reshape(bags, -1, rows.shape[1]).amax(1)
    # Inductor leaves scatter amax to a fallback: compare every bag with every row instead.
    member = bag_of.unsqueeze(0) == torch.arange(bags, device=rows.device).unsqueeze(1)
    return torch.where(member.unsqueeze(2), rows.unsqueeze(0), lowest.unsqueeze(0)).amax(1)


def _weight_dtypes(torch: ModuleType) -> tuple[Any, ...]:
    return (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _only_pooled_output_used(node: Any) -> bool:
    return all(
        user.op == "call_function"
        and user.target is operator.getitem
        and (user.args[1] == 0 or not user.users)
        for user in node.users
    )


def _rows_of_bags(torch: ModuleType, node: Any) -> Any:
    """The 2-D index tensor (one bag per row) that a call's indices flatten, where its offsets
    are the row starts: what `nn.EmbeddingBag` exports for a 2-D input (a reshape to 1-D and
    an arange by the row length); None for any other call."""
    aten = torch.ops.aten
    indices, offsets = node.args[1], node.args[2]
    if not all(getattr(arg, "op", None) == "call_function" for arg in (indices, offsets)):
        return None
    flattened = indices.target in (aten.reshape.default, aten.view.default)
    if not flattened or list(indices.args[1]) != [-1]:
        return None
    rows = indices.args[0]
    shape = input_shape(indices)
    if shape is None or len(shape) != 2 or type(shape[1]) is not int:
        return None
    arange = offsets.target == aten.arange.start_step and len(offsets.args) == 3
    if not arange or offsets.args[0] != 0 or offsets.args[2] != shape[1]:
        return None
    return None if argument(node, 7, "include_last_offset", False) else rows


def _max_fits(node: Any, fixed_length: bool) -> bool:
    """Whether a max bag's form applies: fixed-length bags, or a dense comparison of static
    sizes within DENSE_LIMIT."""
    indices = input_shape(node, 1)
    if fixed_length or (indices is not None and len(indices) == 2):
        return True
    offsets = input_shape(node, 2)
    weight = input_shape(node, 0)
    if offsets is None or weight is None:
        return False
    bags = offsets[0] - (1 if argument(node, 7, "include_last_offset", False) else 0)
    numel = static_numel((bags, *(indices or ()), weight[1]))
    return numel is not None and numel <= DENSE_LIMIT


def _rewritable(torch: ModuleType, node: Any, fixed_length: bool) -> bool:
    mode = argument(node, 4, "mode", SUM)
    weight = node.args[0].meta["val"]
    return (
        (mode in (SUM, MEAN) or (mode == MAX and _max_fits(node, fixed_length)))
        and weight.dtype in _weight_dtypes(torch)
        and _only_pooled_output_used(node)
    )


def embedding_bag_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every embedding bag whose pooled output alone is read as a lookup
    and a segment sum (sum, mean) or maximum (max), how many calls were rewritten). For slim
    CUDA blobs only: the slim CPU shims serve the op natively."""
    aten = torch.ops.aten
    bag = _bag(torch)
    table = {aten.embedding_bag.default: bag, aten.embedding_bag.padding_idx: bag}
    calls = [
        node for node in exported.graph.nodes if node.op == "call_function" and node.target in table
    ]
    rows = {node: _rows_of_bags(torch, node) for node in calls}
    # The table rewrites every call of the op, so one that must keep the fallback keeps it
    # for all.
    if not calls or not all(_rewritable(torch, node, rows[node] is not None) for node in calls):
        return exported, 0
    # Fixed-length bags reach the form as their 2-D indices (ATen's op takes those too): a
    # max over them is a reduction of each row's lookups, not a comparison with every bag.
    for node, indices in rows.items():
        if indices is not None:
            node.args = (node.args[0], indices, *node.args[2:])
    exported.graph_module.graph.eliminate_dead_code()
    exported.graph_module.recompile()
    return exported.run_decompositions(table), len(calls)
