"""Indexing that Inductor leaves to ATen's `index`, in a form it generates, for the slim
targets.

Inductor lowers `x[i]` with integer index tensors itself, but calls ATen's `index.Tensor`
(a shim the slim runtimes do not have: general advanced indexing) in two cases real models
hit: a boolean mask (`boxes[scores > 0.5]`, `tokens[attention_mask]`) and, on CUDA, index
tensors made on the CPU (`x[torch.arange(n), labels]` without a device, which eager
accepts). Compile rewrites such a call as ATen itself reads it: a mask of k dims is the k
integer index tensors of its `nonzero()` (its true positions in row-major order, so the
selected elements come in the same order), and every index tensor is moved to the indexed
tensor's device. The mask's count of true values sizes the result, read from the data
(`nonzero`, a shim both slim runtimes have; on CUDA a host step, as any output sized by
the data).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import rewrite_calls


def _needs_form(torch: ModuleType, x: Any, indices: list[Any]) -> bool:
    """Whether Inductor would call ATen's index: a mask, or an index on another device."""
    return any(t is not None and (t.dtype == torch.bool or t.device != x.device) for t in indices)


def _index(torch: ModuleType) -> Any:
    def index(x: Any, indices: list[Any]) -> Any:
        if not _needs_form(torch, x, indices):
            return NotImplemented
        integer: list[Any] = []
        for t in indices:
            if t is None:
                integer.append(None)
            elif t.dtype == torch.bool:
                integer.extend(t.to(x.device).nonzero().unbind(1))
            else:
                integer.append(t.to(x.device))
        return torch.ops.aten.index.Tensor(x, integer)

    return index


def masks_in_integer_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every `index.Tensor` call that has a boolean mask or an index on
    another device than the indexed tensor in integer form on that device, how many calls
    were rewritten)."""

    def call(node: Any) -> bool:
        value = node.args[0].meta.get("val")
        indices = [i.meta.get("val") if i is not None else None for i in node.args[1]]
        return value is not None and _needs_form(torch, value, indices)

    return rewrite_calls(exported, {torch.ops.aten.index.Tensor: (_index(torch), call)})
