"""The mode along a dim as dense comparisons, for slim CUDA blobs.

`torch.mode` is a fallback Inductor leaves to ATen's kernel, which a blob reaches through
its shim; the slim CUDA shims run it on the host (a round trip per call, and a run that
cannot be captured whole in a CUDA graph). For a slim CUDA target compile rewrites a mode
along a static dim of at most `DIM_LIMIT` elements into comparisons Inductor generates:
each element's count of equal elements in its slice, the smallest of the most frequent
values, and the last position holding it, which is ATen's CPU result (ATen leaves the index
of a repeated value unspecified on CUDA). A NaN equals nothing here, so a slice of NaNs
only gives NaN at its last position. Calls whose comparisons would exceed `DENSE_LIMIT`
elements, or with a dynamic size, keep the fallback.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import DENSE_LIMIT, argument, input_shape, rewrite_calls, static_numel

# The longest slice compared (its comparisons grow with the square of it).
DIM_LIMIT = 512


def _applies(shape: Any, dim: int) -> bool:
    numel = static_numel(shape)
    if numel is None or not shape or numel == 0:
        return False
    length = shape[dim % len(shape)]
    return length <= DIM_LIMIT and numel * length <= DENSE_LIMIT


def _mode(torch: ModuleType) -> Any:
    def mode(x: Any, dim: int = -1, keepdim: bool = False) -> tuple[Any, Any]:
        if not _applies(tuple(x.shape), dim):
            return NotImplemented
        dim = dim % x.dim()
        rows = x.movedim(dim, -1)  # [..., n]
        n = rows.shape[-1]
        counts = (rows.unsqueeze(-1) == rows.unsqueeze(-2)).sum(-1)  # [..., n]
        most = counts == counts.amax(-1, keepdim=True)
        # The smallest of the most frequent values (a masked min), then its last position.
        if rows.is_floating_point():
            largest = float("inf")
        else:
            largest = torch.iinfo(rows.dtype).max if rows.dtype != torch.bool else True
        value = torch.where(most, rows, largest).amin(-1, keepdim=True)
        positions = torch.arange(n, device=x.device).expand(rows.shape)
        holding = (rows == value) | (torch.isnan(rows) & torch.isnan(value))
        index = torch.where(holding, positions, -1).amax(-1, keepdim=True)
        value, index = value.movedim(-1, dim), index.movedim(-1, dim)
        if not keepdim:
            value, index = value.squeeze(dim), index.squeeze(dim)
        return value, index

    return mode


def modes_in_dense_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every mode along a static dim of at most DIM_LIMIT elements whose
    comparisons fit DENSE_LIMIT as dense comparisons, how many calls were rewritten). For
    slim CUDA blobs only: the slim CPU shims compute the mode."""

    def call(node: Any) -> bool:
        return _applies(input_shape(node), int(argument(node, 1, "dim", -1)))

    return rewrite_calls(exported, {torch.ops.aten.mode.default: (_mode(torch), call)})
