"""Categorical sampling (`torch.multinomial`) in its math form, for a torch whose Inductor has
no C shim for it.

A model that samples inside its graph (a language model's next token from its softmax, a
sampler over classes) exports `aten.multinomial`. No torch so far has a C shim for it:
Inductor compiles it through libtorch's proxy executor, which slim runtimes lack, so
compile refused such models. Compile rewrites each call with the Gumbel-max trick: with
G = -log(-log(U)) for uniform U, argmax(log p + G) over the categories is a draw from p
(normalised or not: the log of the scale is the same for every key), and the k largest keys
are k draws without replacement, in the order sequential sampling gives them; with
replacement each of the k draws has keys of its own. Categories of probability 0 (log p =
-inf) are never drawn. The uniform draws are Inductor's own random ops, which the slim
shims seed (`shimkit.runtime.manual_seed`): the samples follow torch's distribution, not
torch's values. A call given its own generator is left alone.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import rewrite_calls
from shimkit.aot.torchenv import torch_has_c_shim


def _multinomial(torch: ModuleType) -> Any:
    def multinomial(
        probs: Any, num_samples: int, replacement: bool = False, generator: Any = None
    ) -> Any:
        if generator is not None:
            return NotImplemented
        log_p = torch.log(probs.to(torch.promote_types(probs.dtype, torch.float32)))
        if replacement:
            shape = (*probs.shape[:-1], num_samples, probs.shape[-1])
            uniform = torch.rand(shape, dtype=log_p.dtype, device=probs.device)
            return (log_p.unsqueeze(-2) - torch.log(-torch.log(uniform))).argmax(-1)
        uniform = torch.rand_like(log_p)
        return (log_p - torch.log(-torch.log(uniform))).topk(num_samples, -1).indices

    return multinomial


def multinomial_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every multinomial call in its math form, how many calls were
    rewritten). With `only_without_shim` (the default) the op is left alone when the
    installed torch has a C shim for it."""
    if only_without_shim and torch_has_c_shim("aten.multinomial.default"):
        return exported, 0
    op = torch.ops.aten.multinomial.default
    return rewrite_calls(
        exported, {op: (_multinomial(torch), lambda node: "generator" not in node.kwargs)}
    )
