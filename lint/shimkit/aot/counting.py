"""Counting ops in their math form, for a torch whose Inductor has no C shim for them.

`torch.bincount`, `torch.unique` (`aten._unique2`, over the flattened tensor) and
`torch.unique_consecutive` (without `dim`) have outputs whose length depends on the data.
No torch so far has a C shim for them, so Inductor compiled them through libtorch's proxy
executor, which slim runtimes lack, and compile refused such models. Compile rewrites each
call into what it computes, with ops the slim shims serve:
- bincount: the length read from the data (`.item()`, a size the program learns at run
  time, through the `aoti_torch_item_*` shims), zeros of that length and a scatter-add of
  ones or of the weights, in ATen's result dtype (int64 without weights; float32 weights
  stay float32, any other weights become float64);
- unique: a stable sort, a mask of each run's first element, its values (`masked_select`,
  sized by the data), the inverse as each element's run number (a cumulative sum, scattered
  back through the sort's order) and the counts as a scatter-add over the runs. The values
  come out sorted, also for `sorted=False` (ATen's CPU kernel sorts too; the order is
  unspecified there); NaNs are distinct, each its own value, as in ATen;
- unique_consecutive: the same without the sort.
An inverse or counts not asked for are empty, as ATen returns them. Inductor then generates
the kernels around the fallbacks (sort, cumsum, masked_select, scatter).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.torchenv import torch_has_c_shim


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


def _runs(torch: ModuleType, flat: Any, want_inverse: bool, want_counts: bool) -> Any:
    """(values, inverse, counts) of the runs of equal neighbours in 1-D `flat`; the inverse
    as each element's run number, in `flat`'s order."""
    first = torch.ones_like(flat, dtype=torch.bool)
    if flat.numel() > 1:
        first = torch.cat([first[:1], flat[1:] != flat[:-1]])
    run = torch.cumsum(first.to(torch.int64), 0) - 1
    values = torch.masked_select(flat, first)
    nothing = torch.empty(0, dtype=torch.int64, device=flat.device)
    counts = nothing
    if want_counts:
        counts = torch.zeros(values.shape[0], dtype=torch.int64, device=flat.device)
        counts = counts.scatter_add(0, run, torch.ones_like(run))
    return values, run if want_inverse else nothing, counts


def _unique(torch: ModuleType) -> Any:
    def unique(
        x: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
    ) -> tuple[Any, Any, Any]:
        values, order = torch.sort(x.flatten(), stable=True)
        values, run, counts = _runs(torch, values, return_inverse, return_counts)
        if return_inverse:  # each element's run, back in x's order and shape
            run = torch.empty_like(run).scatter(0, order, run).reshape(x.shape)
        return values, run, counts

    return unique


def _unique_consecutive(torch: ModuleType) -> Any:
    def unique_consecutive(
        x: Any, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
    ) -> tuple[Any, Any, Any]:
        values, run, counts = _runs(torch, x.flatten(), return_inverse, return_counts)
        return values, run.reshape(x.shape) if return_inverse else run, counts

    return unique_consecutive


def _dim(node: Any) -> Any:
    """unique_consecutive's `dim` argument of a call node."""
    return node.kwargs.get("dim", node.args[3] if len(node.args) > 3 else None)


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
        aten.unique_consecutive.default: _unique_consecutive(torch),
    }
    table = {
        op: form
        for op, form in forms.items()
        if not (only_without_shim and torch_has_c_shim(str(op)))
    }

    calls = [n for n in exported.graph.nodes if n.op == "call_function" and n.target in table]
    consecutive = aten.unique_consecutive.default
    if any(n.target == consecutive and _dim(n) is not None for n in calls):
        # Only the flattened form is rewritten, and run_decompositions rewrites every call
        # of an op or none: with a dim among them, that op is left as it is.
        table.pop(consecutive)
        calls = [n for n in calls if n.target != consecutive]
    if not calls:
        return exported, 0
    return exported.run_decompositions(table), len(calls)
