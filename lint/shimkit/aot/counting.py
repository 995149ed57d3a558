"""Counting ops in their math form, for a torch whose Inductor has no C shim for them.

`torch.bincount` exports as `aten.bincount`, whose output length depends on the data:
max(x) + 1, at least `minlength`. No torch so far has a C shim for it, so Inductor compiled
it through libtorch's proxy executor, which slim runtimes lack, and compile refused such
models. Compile rewrites each call into what it computes: the length read from the data
(`.item()`, a size the program learns at run time, through the `aoti_torch_item_*` shims),
zeros of that length, and a scatter-add of ones or of the weights, in ATen's result dtype
(int64 without weights; float32 weights stay float32, any other weights become float64).
Inductor then generates the kernels; the scatter is a fallback the slim shims serve.
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


def bincount_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every `aten.bincount` in its math form, how many calls were
    rewritten). With `only_without_shim` (the default) it is left alone when the installed
    torch has a C shim for it."""
    op = torch.ops.aten.bincount.default
    if only_without_shim and torch_has_c_shim("aten.bincount.default"):
        return exported, 0
    calls = [n for n in exported.graph.nodes if n.op == "call_function" and n.target == op]
    if not calls:
        return exported, 0
    return exported.run_decompositions({op: _bincount(torch)}), len(calls)
