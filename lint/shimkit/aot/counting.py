"""Counting ops in their math form, for a torch whose Inductor has no C shim for them.

`torch.bincount`, `torch.unique` (`aten._unique2` over the flattened tensor, `aten.unique_dim`
along a dim) and `torch.unique_consecutive` have outputs whose length depends on the data.
No torch so far has a C shim for them, so Inductor compiled them through libtorch's proxy
executor, which slim runtimes lack, and compile refused such models. Compile rewrites each
call into what it computes, with ops the slim shims serve:
- bincount: the length read from the data (`.item()`, a size the program learns at run
  time, through the `aoti_torch_item_*` shims), zeros of that length and a scatter-add of
  ones or of the weights, in ATen's result dtype (int64 without weights; float32 weights
  stay float32, any other weights become float64);
- unique: a stable sort, a mask of each run's first element, those elements (`nonzero`,
  sized by the data), the inverse as each element's run number (a cumulative sum, scattered
  back through the sort's order) and the counts as a scatter-add over the runs. The values
  come out sorted, also for `sorted=False` (ATen's CPU kernel sorts too; the order is
  unspecified there); NaNs are distinct, each its own value, as in ATen;
- unique along a dim: the same over rows (one per index along the dim), sorted
  lexicographically by a stable sort per column, the last first; rows differ where any
  element does. Rows of more than MAX_SORTED_ROW_WIDTH elements, or of a dynamic width, are
  left to the check, which names the op;
- unique_consecutive, with or without a dim: the same without the sort.
An inverse or counts not asked for are empty where ATen returns them so (without a dim);
along a dim ATen computes both anyway, and so does the rewrite. Inductor then generates the
kernels around the fallbacks (sort, cumsum, nonzero, scatter).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.aot.torchenv import torch_has_c_shim

# unique along a dim sorts its rows lexicographically, one stable sort per element of a row:
# rows wider than this are left to the check, which names the op.
MAX_SORTED_ROW_WIDTH = 64


def _bincount(torch: ModuleType) -> Any:
    def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
        if x.numel() == 0:
            length: Any = minlength
        else:
            length = (x.max() + 1).clamp(min=minlength).item()
            torch._check(length >= minlength)
        if weights is None:
            counted = torch.ones_like(x, dtype=torch.int64)
        else:
            dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
            counted = weights.to(dtype)
        return torch.zeros(length, dtype=counted.dtype, device=x.device).scatter_add(0, x, counted)

    return bincount


def _runs(torch: ModuleType, rows: Any) -> tuple[Any, Any, Any]:
    """(values, inverse, counts) of the runs of equal neighbouring rows of 2-D `rows`:
    each run's first row, each row's run number, each run's length. Rows differ where any
    element differs (NaNs differ from everything, as in ATen)."""
    # The first row starts a run (none when there are no rows), and so does each row that
    # differs from the one before it.
    starts = torch.ones(rows.shape[0], dtype=torch.bool, device=rows.device)[:1]
    first = torch.cat([starts, (rows[1:] != rows[:-1]).any(1)])
    run = torch.cumsum(first.to(torch.int64), 0) - 1
    values = rows.index_select(0, torch.nonzero(first).squeeze(1))
    counts = torch.zeros(values.shape[0], dtype=torch.int64, device=rows.device)
    return values, run, counts.scatter_add(0, run, torch.ones_like(run))


def _lexicographic_order(torch: ModuleType, rows: Any) -> Any:
    """The order that sorts 2-D `rows` lexicographically, ties kept in place: a stable sort
    by each column, the last first (a radix sort over the columns)."""
    order = torch.arange(rows.shape[0], device=rows.device)
    for column in reversed(range(rows.shape[1])):
        _, step = torch.sort(rows[:, column].index_select(0, order), stable=True)
        order = order.index_select(0, step)
    return order


def _as_rows(x: Any, dim: int) -> Any:
    """`x` as 2-D rows: one per index along `dim`, its elements in order."""
    moved = x.movedim(dim, 0)
    return moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))


def _from_rows(rows: Any, x: Any, dim: int) -> Any:
    """Rows of `x`'s (made by `_as_rows`) back in `x`'s layout, as many as `rows` has."""
    moved = x.movedim(dim, 0)
    return rows.reshape(rows.shape[0], *moved.shape[1:]).movedim(0, dim)


def _unique(torch: ModuleType) -> Any:
    def unique(
        x: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
    ) -> tuple[Any, Any, Any]:
        values, order = torch.sort(x.flatten(), stable=True)
        values, run, counts = _runs(torch, values.unsqueeze(1))
        nothing = torch.empty(0, dtype=torch.int64, device=x.device)
        # Each element's run, back in x's order and shape.
        inverse = torch.empty_like(run).scatter(0, order, run).reshape(x.shape)
        return (
            values.squeeze(1),
            inverse if return_inverse else nothing,
            counts if return_counts else nothing,
        )

    return unique


def _unique_dim(torch: ModuleType) -> Any:
    def unique_dim(
        x: Any,
        dim: int,
        sorted: bool = True,
        return_inverse: bool = False,
        return_counts: bool = False,
    ) -> tuple[Any, Any, Any]:
        # ATen computes the inverse and the counts whether asked or not: so does this.
        rows = _as_rows(x, dim)
        order = _lexicographic_order(torch, rows)
        values, run, counts = _runs(torch, rows.index_select(0, order))
        inverse = torch.empty_like(run).scatter(0, order, run)
        return _from_rows(values, x, dim), inverse, counts

    return unique_dim


def _unique_consecutive(torch: ModuleType) -> Any:
    def unique_consecutive(
        x: Any, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
    ) -> tuple[Any, Any, Any]:
        if dim is not None:  # along a dim: inverse and counts whether asked or not, as ATen
            values, run, counts = _runs(torch, _as_rows(x, dim))
            return _from_rows(values, x, dim), run, counts
        values, run, counts = _runs(torch, x.flatten().unsqueeze(1))
        nothing = torch.empty(0, dtype=torch.int64, device=x.device)
        return (
            values.squeeze(1),
            run.reshape(x.shape) if return_inverse else nothing,
            counts if return_counts else nothing,
        )

    return unique_consecutive


def _sorted_row_width(node: Any) -> int | None:
    """How many elements each row of a unique_dim call has (the columns its lexicographic
    sort sorts by, one stable sort each); None where that is not a constant."""
    value, dim = node.args[0].meta.get("val"), node.args[1]
    if value is None:
        return None
    width = 1
    for d, size in enumerate(value.shape):
        if d != dim % value.dim():
            if type(size) is not int:
                return None
            width *= size
    return width


def counting_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every bincount, unique and unique_consecutive without `dim` in its
    math form, how many calls were rewritten). With `only_without_shim` (the default) an op
    is left alone when the installed torch has a C shim for it."""
    aten = torch.ops.aten
    forms = {
        aten.bincount.default: _bincount(torch),
        aten._unique2.default: _unique(torch),
        aten.unique_dim.default: _unique_dim(torch),
        aten.unique_consecutive.default: _unique_consecutive(torch),
    }
    table = {
        op: form
        for op, form in forms.items()
        if not (only_without_shim and torch_has_c_shim(str(op)))
    }
    calls = [n for n in exported.graph.nodes if n.op == "call_function" and n.target in table]
    unsortable = [
        n
        for n in calls
        if n.target == aten.unique_dim.default
        and ((width := _sorted_row_width(n)) is None or width > MAX_SORTED_ROW_WIDTH)
    ]
    if unsortable:
        # run_decompositions rewrites every call of an op or none: with rows too wide (or of
        # dynamic width) among them, unique_dim is left as it is, and the check names it.
        table.pop(aten.unique_dim.default)
        calls = [n for n in calls if n.target != aten.unique_dim.default]
    if not calls:
        return exported, 0
    return exported.run_decompositions(table), len(calls)
