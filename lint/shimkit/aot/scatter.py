"""Scatter and index reductions (amax, amin, prod, mean) as dense comparisons, for slim
CUDA blobs.

Inductor generates sum scatters itself (atomic adds); `scatter_reduce` with amax, amin, prod
or mean, and `index_reduce`, it leaves to ATen's kernels, which a blob reaches through their
shims. The slim CUDA shims run those on the host: a round trip per call, and a run that
cannot be captured whole in a CUDA graph. For a slim CUDA target compile rewrites such calls
over floating-point tensors into a reduction Inductor generates: each source element is
compared with every position along the scattered dim (a mask of the index's shape times that
dim's size), the matching ones are reduced along the index's dim, and each position that
was hit combines its result with the input (when `include_self`) or takes it (when not);
positions no index names keep the input. Mean divides by the elements reduced (plus one
with the input), as ATen does. index_reduce is the scatter of its index along the dim.
Calls whose mask would exceed `DENSE_LIMIT` elements, or with dynamic sizes, keep the
fallback.

A plain scatter of boolean or int64 values (top-p filtering's mask put back in vocabulary
order; the ranks of a sort's order) is a fallback on CUDA too: Inductor counts both among the
types its GPU atomics lack, though a plain scatter stores without them
(`plain_scatters_in_generated_form`). Boolean values are scattered as bytes and read back as
booleans. For int64 values compile scatters each source position (int32) and gathers the
source at it, over the input's region the index reaches (ATen reads only the source's part
the index covers, and so does the form; the rest of the input stays as it is), where the
index is no larger than the source, nor than the input but along the dim, whatever its
symbols' values: static sizes that are so, or dynamic ones that are the same size (a batch
shared by the tensors); other dynamic int64 scatters keep the fallback. A target several
sources land on gets one of them whole, as from ATen.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import (
    DENSE_LIMIT,
    argument,
    floating_input,
    input_shape,
    rewrite_calls,
    static_numel,
)

REDUCTIONS = ("amax", "amin", "prod", "mean")


def _applies(self_shape: Any, index_shape: Any, dim: int, reduce: str, floating: bool) -> bool:
    if reduce not in REDUCTIONS or not floating:
        return False
    numel, positions = static_numel(index_shape), static_numel(self_shape)
    if numel is None or positions is None or not self_shape:
        return False
    return numel * self_shape[dim % len(self_shape)] <= DENSE_LIMIT


def _dense_scatter_reduce(
    torch: ModuleType, input: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool
) -> Any:
    rank = input.dim()
    dim = dim % rank
    size = input.shape[dim]
    # The region the index covers: its own extent, and all of the scattered dim.
    covered = [size if k == dim else index.shape[k] for k in range(rank)]
    src = src[tuple(slice(0, n) for n in index.shape)]  # ATen reads only that much of src
    current = input[tuple(slice(0, n) for n in covered)]
    positions = torch.arange(size, device=input.device).view([1] * rank + [size])
    hit = index.unsqueeze(-1) == positions  # [*index.shape, size]
    values = src.unsqueeze(-1)
    if reduce == "amax":
        reduced = torch.where(hit, values, float("-inf")).amax(dim)
    elif reduce == "amin":
        reduced = torch.where(hit, values, float("inf")).amin(dim)
    elif reduce == "prod":
        reduced = torch.where(hit, values, 1.0).prod(dim)
    else:
        reduced = torch.where(hit, values, 0.0).sum(dim)
    reduced = reduced.movedim(-1, dim).to(input.dtype)
    count = hit.sum(dim).movedim(-1, dim)  # how many elements each position takes
    if reduce == "mean":
        total = reduced + current if include_self else reduced
        counted = count + 1 if include_self else count
        reduced = total / counted.clamp(min=1).to(input.dtype)
    elif include_self and reduce == "amax":
        reduced = torch.maximum(reduced, current)
    elif include_self and reduce == "amin":
        reduced = torch.minimum(reduced, current)
    elif include_self:
        reduced = reduced * current
    combined = torch.where(count > 0, reduced, current)
    return _within_input(torch, input, combined, covered)


def _within_input(torch: ModuleType, input: Any, region: Any, covered: list[int]) -> Any:
    """`input` with its leading `covered` region replaced by `region` (the rest as it is)."""
    rank = input.dim()
    if covered == list(input.shape):
        return region
    padding = []
    for k in reversed(range(rank)):
        padding += [0, input.shape[k] - covered[k]]
    padded = torch.nn.functional.pad(region, padding)
    inside = None
    for k in range(rank):
        if covered[k] != input.shape[k]:
            along = torch.arange(input.shape[k], device=input.device) < covered[k]
            along = along.view([-1 if j == k else 1 for j in range(rank)])
            inside = along if inside is None else inside & along
    return torch.where(inside, padded, input)


def _scatter_reduce(torch: ModuleType) -> Any:
    def scatter_reduce(
        input: Any, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True
    ) -> Any:
        if not _applies(
            tuple(input.shape), tuple(index.shape), dim, reduce, input.is_floating_point()
        ):
            return NotImplemented
        return _dense_scatter_reduce(torch, input, dim, index, src, reduce, include_self)

    return scatter_reduce


def _index_reduce(torch: ModuleType) -> Any:
    def index_reduce(
        input: Any, dim: int, index: Any, source: Any, reduce: str, *, include_self: bool = True
    ) -> Any:
        if not _applies(
            tuple(input.shape), tuple(source.shape), dim, reduce, input.is_floating_point()
        ):
            return NotImplemented
        dim = dim % input.dim()
        shape = [1] * source.dim()
        shape[dim] = index.shape[0]
        spread = index.view(shape).expand(source.shape)
        return _dense_scatter_reduce(torch, input, dim, spread, source, reduce, include_self)

    return index_reduce


def scatter_reductions_in_dense_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every floating-point scatter_reduce and index_reduce of amax, amin,
    prod or mean whose comparison mask fits DENSE_LIMIT in its dense form, how many calls
    were rewritten). For slim CUDA blobs only: the slim CPU shims compute both."""
    aten = torch.ops.aten

    def reducing_from(source: int) -> Any:  # the check of a call whose source is arg `source`
        def check(node: Any) -> bool:
            return _applies(
                input_shape(node, 0), input_shape(node, source), int(node.args[1]),
                argument(node, 4, "reduce", ""), floating_input(node),
            )  # fmt: skip

        return check

    return rewrite_calls(
        exported,
        {
            aten.scatter_reduce.two: (_scatter_reduce(torch), reducing_from(2)),
            aten.index_reduce.default: (_index_reduce(torch), reducing_from(3)),
        },
    )


def _no_larger(size: Any, bound: Any) -> bool:
    """Whether `size` <= `bound` for every value their symbols may take: two ints that are so,
    or one size (the same symbol or expression, as a dynamic batch shared by the tensors)."""
    if type(size) is int and type(bound) is int:
        return size <= bound
    same = getattr(size, "node", None), getattr(bound, "node", None)
    return None not in same and same[0].expr == same[1].expr


def _positions_cover(self_shape: Any, index_shape: Any, src_shape: Any, dim: int) -> bool:
    """Whether an int64 scatter can be a scatter of positions and a gather: the index no
    larger than the source, nor than the input but along `dim` (as ATen asks), for every
    value of the shapes' symbols."""
    shapes = (self_shape, index_shape, src_shape)
    if any(shape is None for shape in shapes):
        return False
    if not self_shape or not len(self_shape) == len(index_shape) == len(src_shape):
        return False
    dim = dim % len(self_shape)
    return all(
        _no_larger(i, s) and (d == dim or _no_larger(i, a))
        for d, (a, i, s) in enumerate(zip(self_shape, index_shape, src_shape, strict=True))
    )


def _plain_scatter(torch: ModuleType) -> Any:
    def scatter(input: Any, dim: int, index: Any, src: Any) -> Any:
        if input.dtype == torch.bool and src.dtype == torch.bool:
            as_bytes = torch.scatter(input.to(torch.uint8), dim, index, src.to(torch.uint8))
            return as_bytes.to(torch.bool)
        if input.dtype != torch.int64 or src.dtype != torch.int64:
            return NotImplemented
        if not _positions_cover(tuple(input.shape), tuple(index.shape), tuple(src.shape), dim):
            return NotImplemented
        rank = input.dim()
        dim = dim % rank
        src = src[tuple(slice(0, n) for n in index.shape)]  # ATen reads only that much
        # The input's region the index reaches: its extent, and all of the scattered dim.
        covered = [input.shape[k] if k == dim else index.shape[k] for k in range(rank)]
        # Each target's source position (int32, which Inductor scatters itself; -1 where
        # none lands), then the source at that position: one whole value per target, also
        # where several land on it.
        along = [1] * rank
        along[dim] = index.shape[dim]
        positions = torch.arange(index.shape[dim], dtype=torch.int32, device=index.device)
        positions = positions.view(along).expand(index.shape)
        unset = torch.full(covered, -1, dtype=torch.int32, device=input.device)
        landed = unset.scatter(dim, index, positions)
        taken = src.gather(dim, landed.clamp(min=0).to(torch.int64))
        current = input[tuple(slice(0, n) for n in covered)]
        return _within_input(torch, input, torch.where(landed >= 0, taken, current), covered)

    return scatter


def _fallback_scatter(node: Any) -> bool:
    names = ("self", "dim", "index", "src")
    given = [argument(node, position, name, None) for position, name in enumerate(names)]
    tensors = [given[i].meta.get("val") if hasattr(given[i], "meta") else None for i in (0, 2, 3)]
    if any(value is None for value in tensors) or not isinstance(given[1], int):
        return False
    input, index, src = tensors
    if str(input.dtype) == str(src.dtype) == "torch.bool":
        return True
    return str(input.dtype) == str(src.dtype) == "torch.int64" and _positions_cover(
        tuple(input.shape), tuple(index.shape), tuple(src.shape), given[1]
    )


def plain_scatters_in_generated_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every plain scatter of boolean values done on bytes, and every one of
    int64 values whose shapes allow it as a scatter of positions and a gather, how many
    calls were rewritten). For slim CUDA blobs only: on the CPU Inductor generates them."""
    aten = torch.ops.aten
    forms = {aten.scatter.src: (_plain_scatter(torch), _fallback_scatter)}
    return rewrite_calls(exported, forms, in_place={aten.scatter_.src: aten.scatter.src})
