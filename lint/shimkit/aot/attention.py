"""Attention in its math form, so Inductor generates the kernels instead of calling a fallback.

Inductor keeps `scaled_dot_product_attention` as a fused fallback op
(`_scaled_dot_product_flash_attention_for_cpu` on the CPU,
`_scaled_dot_product_efficient_attention` / `_flash_attention` / cuDNN
attention on CUDA), which a blob then imports as a shim. Where the slim shims
have no such shim, `shimkit compile` rewrites every call, before Inductor sees
the program, into the reference math of torch's documentation: scaled Q K^T,
the causal and the boolean or additive masks, grouped-query heads repeated,
softmax, times V. Inductor then emits the matmuls as GEMM shims the slim
runtimes have and fuses the rest into its own kernels.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from shimkit.errors import ShimkitError


def _math_attention(torch: ModuleType) -> Any:
    def attention(
        query: Any,
        key: Any,
        value: Any,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> Any:
        if dropout_p != 0.0:
            raise ShimkitError(
                f"scaled_dot_product_attention with dropout_p={dropout_p}: export the model in "
                "eval mode (model.eval()) so that attention has no dropout"
            )
        heads, kv_heads = query.size(-3), key.size(-3)
        if enable_gqa and heads != kv_heads:
            # Each key/value head serves heads // kv_heads query heads (repeat_interleave).
            repeat = heads // kv_heads
            key = key.unsqueeze(-3).expand(*key.shape[:-2], repeat, *key.shape[-2:])
            key = key.flatten(-4, -3)
            value = value.unsqueeze(-3).expand(*value.shape[:-2], repeat, *value.shape[-2:])
            value = value.flatten(-4, -3)
        factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
        scores = torch.matmul(query, key.transpose(-2, -1)) * factor
        if is_causal:
            rows, cols = query.size(-2), key.size(-2)
            keep = torch.ones(rows, cols, dtype=torch.bool, device=query.device).tril()
            scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
            else:
                scores = scores + attn_mask
        return torch.matmul(torch.softmax(scores, dim=-1), value)

    return attention


def attention_ops(torch: ModuleType) -> list[Any]:
    """The attention overloads a program may hold that have a fused fallback."""
    aten = torch.ops.aten
    return [aten.scaled_dot_product_attention.default]


def decompose_attention(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every scaled_dot_product_attention in its math form, how many calls
    were rewritten); the program unchanged when it has none."""
    ops = attention_ops(torch)
    count = sum(
        1 for node in exported.graph.nodes if node.op == "call_function" and node.target in ops
    )
    if count == 0:
        return exported, 0
    table = dict.fromkeys(ops, _math_attention(torch))
    return exported.run_decompositions(table), count
