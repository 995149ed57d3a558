"""Histograms (histc) as bin indices and an index-add, for slim CUDA blobs.

`torch.histc` is a fallback Inductor leaves to ATen's kernel, which a blob reaches through
its shim; the slim CUDA shims run it on the host (a round trip per call, and a run that
cannot be captured whole in a CUDA graph). For a slim CUDA target compile rewrites it over
floating-point input into ops Inductor generates: each element's bin in ATen's CUDA
arithmetic, `trunc((x - min) * bins / (max - min))` (an element at max in the last bin),
and a count of the elements in [min, max] index-added into the bins (counts are whole
numbers, so the order of the adds does not change them). As in ATen, min = max = 0 takes
the range from the data (widened by 1 on each side when all elements are equal), and NaN
is counted in no bin (a data range with NaN in it, which ATen refuses, leaves every bin
empty). An element on a bin's edge can land in the neighbouring bin of ATen's
CPU result, whose arithmetic differs.
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

from shimkit.aot.decompose import floating_input, input_shape, rewrite_calls, static_numel


def _rounded(value: float, dtype: Any, torch: ModuleType) -> float:
    """`value` rounded to float32 when ATen computes in it (a Python float is a double)."""
    if dtype == torch.float64:
        return value
    return struct.unpack("f", struct.pack("f", value))[0]


def _histc(torch: ModuleType) -> Any:
    def histc(x: Any, bins: int = 100, min: float = 0, max: float = 0) -> Any:
        if not x.is_floating_point() or static_numel(tuple(x.shape)) in (None, 0):
            return NotImplemented
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        values = x.flatten().to(compute)
        if min == max:  # the data's range
            low, high = values.amin(), values.amax()  # NaN, and so no bins, when NaN is in
            equal = low == high
            low, high = torch.where(equal, low - 1, low), torch.where(equal, high + 1, high)
            span = high - low
        else:  # the limits in the precision ATen computes in
            low, high = _rounded(min, compute, torch), _rounded(max, compute, torch)
            span = _rounded(high - low, compute, torch)
        inside = (values >= low) & (values <= high)  # NaN is never inside
        where = ((values - low) * bins / span).to(torch.int64)
        where = torch.where(inside, where.clamp(max=bins - 1), 0)
        counts = torch.zeros(bins, dtype=x.dtype, device=x.device)
        return counts.index_add(0, where, inside.to(x.dtype))

    return histc


def histograms_in_index_add_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every histc over a floating-point input of static size as bin
    indices and an index-add, how many calls were rewritten). For slim CUDA blobs only: the
    slim CPU shims compute histc."""

    def call(node: Any) -> bool:
        return floating_input(node) and static_numel(input_shape(node)) not in (None, 0)

    return rewrite_calls(exported, {torch.ops.aten.histc.default: (_histc(torch), call)})
