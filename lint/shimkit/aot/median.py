"""Medians along a dim in their math form, for a torch whose Inductor has no C shim for them.

`x.median(dim)` and `x.nanmedian(dim)` export as `aten.median.dim` and `aten.nanmedian.dim`
(values and indices). No torch so far has a C shim for either: Inductor compiles them
through libtorch's proxy executor, which slim runtimes lack, so compile refused such
models. (The whole-tensor `median()` and `nanmedian()` have shims, which the slim shims
serve.) Compile rewrites each call into a stable sort along the dim and a gather at the
lower median's rank, (n - 1) // 2, of the slice's n elements (nanmedian: of its non-NaN
ones); for `median`, a slice holding a NaN gives NaN at its first NaN. That is ATen's CPU
result, indices of tied values included (tests/aot/test_median_math_form.py compares them;
on CUDA torch leaves the index of a tied median unspecified), except nanmedian's index for a
slice of NaNs only, which is whatever ATen's selection leaves (here: the middle one). The
sort is a fallback the slim shims serve on both devices. For slim CUDA blobs the whole-tensor
medians of at most INDUCTOR_SORT_LIMIT elements take the same form over the flattened tensor
(`whole_medians_in_sort_form`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import input_shape, rewrite_calls, static_numel
from shimkit.aot.merge_sort import INDUCTOR_SORT_LIMIT
from shimkit.aot.torchenv import torch_has_c_shim

OPS = ("median", "nanmedian")


def _median(torch: ModuleType, ignore_nan: bool) -> Any:
    def median(x: Any, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
        if x.dim() == 0:  # a scalar is its own median, at index 0
            return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
        values, indices = torch.sort(x, dim=dim, stable=True)  # NaN sorts last, in order
        n = x.shape[dim]
        nan = torch.isnan(x) if x.is_floating_point() else torch.zeros_like(x, dtype=torch.bool)
        if ignore_nan:  # the median of the non-NaN values; an all-NaN slice's middle NaN
            count = (~nan).sum(dim, keepdim=True)
            rank = torch.where(count > 0, (count - 1) // 2, (n - 1) // 2)
        else:
            rank = torch.full_like(nan.sum(dim, keepdim=True), (n - 1) // 2)
        value, index = values.gather(dim, rank), indices.gather(dim, rank)
        if not ignore_nan and x.is_floating_point():
            has_nan = nan.any(dim, keepdim=True)
            first_nan = nan.to(torch.uint8).argmax(dim, keepdim=True)
            value = torch.where(has_nan, torch.full_like(value, float("nan")), value)
            index = torch.where(has_nan, first_nan, index)
        if not keepdim:
            value, index = value.squeeze(dim), index.squeeze(dim)
        return value, index

    return median


def median_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every median and nanmedian along a dim in its math form, how many
    calls were rewritten). With `only_without_shim` (the default) an op is left alone when
    the installed torch has a C shim for it."""
    aten = torch.ops.aten
    table = {
        getattr(aten, op).dim: _median(torch, op == "nanmedian")
        for op in OPS
        if not (only_without_shim and torch_has_c_shim(f"aten.{op}.dim"))
    }
    return rewrite_calls(exported, {op: (form, lambda node: True) for op, form in table.items()})


def _whole_median(torch: ModuleType, ignore_nan: bool) -> Any:
    along_dim = _median(torch, ignore_nan)

    def median(x: Any) -> Any:
        if not _sortable_whole(tuple(x.shape)):
            return NotImplemented
        return along_dim(x.flatten(), 0)[0]

    return median


def _sortable_whole(shape: tuple[Any, ...] | None) -> bool:
    numel = static_numel(shape)
    return numel is not None and 0 < numel <= INDUCTOR_SORT_LIMIT


def whole_medians_in_sort_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every median() and nanmedian() of a whole tensor of at most
    INDUCTOR_SORT_LIMIT elements as a stable sort of its elements and a pick, how many calls
    were rewritten). For slim CUDA blobs: their shims take these medians on the host (a
    round trip, and no whole-run CUDA graph), while a sort that short is one Inductor
    generates on CUDA; the slim CPU shims have both medians."""
    aten = torch.ops.aten

    def call(node: Any) -> bool:
        return _sortable_whole(input_shape(node))

    return rewrite_calls(
        exported,
        {
            aten.median.default: (_whole_median(torch, ignore_nan=False), call),
            aten.nanmedian.default: (_whole_median(torch, ignore_nan=True), call),
        },
    )
