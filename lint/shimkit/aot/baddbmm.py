"""Batched matrix products with an added input (baddbmm, addbmm) as a bmm and a scaled sum,
for slim CUDA blobs.

Inductor hands `torch.baddbmm` and `torch.addbmm` to ATen's kernels, which a blob reaches
through the `baddbmm_out` and `addbmm` shims. The slim CUDA shims have cuBLAS products for
mm, addmm and bmm but run these two on the host: a round trip per call, and a run that
cannot be captured whole in a CUDA graph (an attention over pooled regions with a learned
position bias, as older architectures write it, paid one per layer). For a slim CUDA target
compile rewrites them into `bmm` (the cuBLAS product) and a sum Inductor generates:
alpha * (batch1 @ batch2) + beta * input, with addbmm's products summed over the batch. As in
ATen, beta = 0 ignores the input (its NaNs and infinities too). The sum is rounded once more
than cuBLAS's fused alpha and beta, so the last bit of a result can differ from torch's.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import rewrite_calls


def _scaled_sum(product: Any, input: Any, beta: Any, alpha: Any) -> Any:
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # ATen ignores the input then, NaN included
        return product
    return product + (input if beta == 1 else input * beta)


def _baddbmm(torch: ModuleType) -> Any:
    def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return _scaled_sum(torch.bmm(batch1, batch2), input, beta, alpha)

    return baddbmm


def _addbmm(torch: ModuleType) -> Any:
    def addbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
        return _scaled_sum(torch.bmm(batch1, batch2).sum(0), input, beta, alpha)

    return addbmm


def batched_products_in_bmm_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every baddbmm and addbmm as a bmm and a scaled sum, how many calls
    were rewritten). For slim CUDA blobs only: the slim CPU shims compute both."""
    aten = torch.ops.aten

    def every_call(node: Any) -> bool:
        return True

    return rewrite_calls(
        exported,
        {
            aten.baddbmm.default: (_baddbmm(torch), every_call),
            aten.addbmm.default: (_addbmm(torch), every_call),
        },
    )
