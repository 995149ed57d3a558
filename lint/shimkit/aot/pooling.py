"""Average and adaptive pools Inductor leaves to fallbacks, as masked reductions, for slim
CUDA blobs.

Inductor generates pooling kernels itself for max pools of any window and for average and
adaptive pools over windows of up to 25 elements. It leaves to ATen's kernels, which a blob
reaches through their shims: 2-D and 3-D average pools over larger windows whose stride
differs from their kernel, 2-D adaptive pools whose largest window (Inductor's estimate) is
larger, and every 3-D adaptive pool but a global average. The slim CUDA shims run those on
the host: a round trip per call, and a run that cannot be captured whole in a CUDA graph
(regions pooled into tokens, a video net's pooled features). For a slim CUDA target compile
rewrites such calls into reductions Inductor generates, one spatial dim at a time: each
output's window along a dim is a mask over the input's positions (start and end as ATen
computes them: kernel, stride, padding and ceil_mode, or adaptive), and the masked elements
are reduced along that dim, then along the next. An average divides the window's sum by
ATen's divisor (padding counted or not, or the override). An adaptive max pool reduces the
last dim first and its index is the flat position of the first largest value in row-major
order, as ATen scans (a window holding only -inf names its first element); where a window
holds NaN the value is NaN as in ATen, and the index names one of its NaNs (ATen's, the
last). The masks make each pass's work the output's positions times the input's along its
dim: calls whose first pass would exceed `DENSE_LIMIT` elements, with dynamic sizes, or
over non-floating input keep the fallback.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import (
    DENSE_LIMIT,
    argument,
    floating_input,
    input_shape,
    rewrite_calls,
    static_numel,
)

# Inductor's largest pooling window (elements) before it falls back (torch 2.11, 2.13).
INDUCTOR_WINDOW_LIMIT = 25


def _sizes(value: Any, n: int, default: Any = None) -> tuple[int, ...]:
    """A pool argument (an int, or a list of 1 or n) as n sizes."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return (value,) * n
    return tuple(value) * n if len(value) == 1 else tuple(value)


def _pooled_size(length: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape (dilation 1)."""
    out = (length + 2 * padding - kernel + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1
    return out


def _mask(torch: ModuleType, starts: Any, ends: Any, length: int) -> Any:
    """[out, length]: which elements each window holds (padding is outside the input)."""
    positions = torch.arange(length, device=starts.device)
    return (positions >= starts[:, None]) & (positions < ends[:, None])


def _adaptive_masks(
    torch: ModuleType, x: Any, output_size: tuple[int, ...]
) -> tuple[list[Any], Any]:
    """ATen's adaptive windows along each pooled dim as masks, and each output's element
    count (broadcast over the pooled dims)."""
    n = len(output_size)
    masks, count = [], None
    for k, out in enumerate(output_size):
        length = x.shape[x.dim() - n + k]
        index = torch.arange(out, device=x.device)
        starts, ends = (index * length) // out, ((index + 1) * length + out - 1) // out
        masks.append(_mask(torch, starts, ends, length))
        along = (ends - starts).view([-1 if j == k else 1 for j in range(n)])
        count = along if count is None else count * along
    return masks, count


def _along(torch: ModuleType, y: Any, axis: int, mask: Any, fill: float, reduce: str) -> Any:
    """`y` reduced along `axis` over each window of `mask` ([out, L]), the windows in place
    of the axis: the sums, or (for "max") the maxima and their positions along the axis."""
    picked = torch.where(mask, y.movedim(axis, -1).unsqueeze(-2), fill)  # [..., out, L]
    if reduce == "sum":
        return picked.sum(-1).movedim(-1, axis)
    values, index = picked.max(-1)  # the first largest
    return values.movedim(-1, axis), index.movedim(-1, axis)


def _masked_sum(torch: ModuleType, x: Any, masks: list[Any]) -> Any:
    n = len(masks)
    for k, mask in enumerate(masks):
        x = _along(torch, x, x.dim() - n + k, mask, 0.0, "sum")
    return x


def _within_window(torch: ModuleType, index: Any, first: Any) -> Any:
    """A max's position moved to its window's first element where it fell before it: the
    first occurrence of -inf, when the whole window is -inf, can be a masked position."""
    return torch.maximum(index, first)


def _masked_max(torch: ModuleType, x: Any, masks: list[Any]) -> tuple[Any, Any]:
    """The max over each window of `x`'s last len(masks) dims and its flat index there (the
    first largest in row-major order). The last dim is reduced first, so each remaining
    position's maximum comes with its first position along the reduced dims; a dim
    reduced later picks the first position holding the maximum and gathers the inner
    positions found there."""
    n = len(masks)
    sizes = x.shape[-n:]
    values, inner = x, []
    for k in reversed(range(n)):
        axis = x.dim() - n + k
        values, index = _along(torch, values, axis, masks[k], float("-inf"), "max")
        first = masks[k].to(torch.int64).argmax(-1)  # each window's first position
        index = _within_window(torch, index, first.view([-1] + [1] * (n - 1 - k)))
        inner = [index, *(position.gather(axis, index) for position in inner)]
    flat = inner[0]
    for k in range(1, n):
        flat = flat * sizes[k] + inner[k]
    return values, flat


def _avg_pool(torch: ModuleType, n: int) -> Any:
    def avg_pool(
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Any:
        if not _avg_pool_applies(n, tuple(x.shape), x.is_floating_point(), kernel_size, stride):
            return NotImplemented
        kernel, steps = _sizes(kernel_size, n), _sizes(stride, n, kernel_size)
        pads = _sizes(padding, n)
        masks, count = [], None
        for k in range(n):
            length = x.shape[x.dim() - n + k]
            out = _pooled_size(length, kernel[k], steps[k], pads[k], ceil_mode)
            starts = torch.arange(out, device=x.device) * steps[k] - pads[k]
            ends = (starts + kernel[k]).clamp(max=length + pads[k])  # ATen's, padding in
            masks.append(_mask(torch, starts, ends, length))
            if count_include_pad:
                along = ends - starts
            else:
                along = ends.clamp(max=length) - starts.clamp(min=0)
            along = along.view([-1 if j == k else 1 for j in range(n)])
            count = along if count is None else count * along
        summed = _masked_sum(torch, x, masks)
        if divisor_override:
            return summed / divisor_override
        return summed / count.to(x.dtype)

    return avg_pool


def _adaptive_avg_pool(torch: ModuleType, n: int) -> Any:
    def adaptive_avg_pool(x: Any, output_size: Any) -> Any:
        if not _adaptive_applies(n, tuple(x.shape), x.is_floating_point(), output_size, True):
            return NotImplemented
        masks, count = _adaptive_masks(torch, x, _sizes(output_size, n))
        return _masked_sum(torch, x, masks) / count.to(x.dtype)

    return adaptive_avg_pool


def _adaptive_max_pool(torch: ModuleType, n: int) -> Any:
    def adaptive_max_pool(x: Any, output_size: Any) -> tuple[Any, Any]:
        if not _adaptive_applies(n, tuple(x.shape), x.is_floating_point(), output_size, False):
            return NotImplemented
        masks, _ = _adaptive_masks(torch, x, _sizes(output_size, n))
        return _masked_max(torch, x, masks)

    return adaptive_max_pool


def _first_pass_fits(shape: tuple[int, ...], outputs: tuple[int, ...]) -> bool:
    """Whether the largest masked pass (the first: every dim at its full size, one dim's
    positions times its windows) fits DENSE_LIMIT."""
    numel = static_numel(shape)
    return numel is not None and numel * max(outputs) <= DENSE_LIMIT


def _poolable(n: int, shape: Any, floating: bool) -> bool:
    """A floating-point input of static shape with n pooled dims and one or two more."""
    return floating and static_numel(shape) is not None and len(shape) in (n + 1, n + 2)


def _avg_pool_applies(n: int, shape: Any, floating: bool, kernel_size: Any, stride: Any) -> bool:
    if not _poolable(n, shape, floating):
        return False
    kernel, steps = _sizes(kernel_size, n), _sizes(stride, n, kernel_size)
    window = 1
    for size in kernel:
        window *= size
    if window <= INDUCTOR_WINDOW_LIMIT or kernel == steps:
        return False  # a window Inductor pools itself, or a plain reduction
    outputs = tuple(length // step + 1 for length, step in zip(shape[-n:], steps, strict=True))
    return _first_pass_fits(shape, outputs)


def _adaptive_applies(n: int, shape: Any, floating: bool, output_size: Any, average: bool) -> bool:
    if not _poolable(n, shape, floating):
        return False
    inputs, outputs = shape[-n:], _sizes(output_size, n)
    if 0 in outputs:
        return False
    if n == 3:  # Inductor has no 3-D adaptive pools but ATen's global average (a mean)
        return not (average and outputs == (1, 1, 1)) and _first_pass_fits(shape, outputs)
    if all(length % out == 0 for length, out in zip(inputs, outputs, strict=True)):
        return False  # equal windows: Inductor's average pool or decomposition
    largest = 1
    for length, out in zip(inputs, outputs, strict=True):
        largest *= -(-(length + out - 1) // out)  # Inductor's estimate, as it decides
    return largest > INDUCTOR_WINDOW_LIMIT and _first_pass_fits(shape, outputs)


def pools_in_masked_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every 2-D and 3-D average or adaptive pool Inductor would leave to
    its fallback in its masked form, where the first pass fits DENSE_LIMIT, how many calls
    were rewritten). For slim CUDA blobs only: the slim CPU shims pool natively."""
    aten = torch.ops.aten
    forms = {}
    for n, avg, adaptive_avg, adaptive_avg_impl, adaptive_max in (
        (2, aten.avg_pool2d, aten.adaptive_avg_pool2d, aten._adaptive_avg_pool2d,
         aten.adaptive_max_pool2d),
        (3, aten.avg_pool3d, aten.adaptive_avg_pool3d, aten._adaptive_avg_pool3d,
         aten.adaptive_max_pool3d),
    ):  # fmt: skip

        def avg_call(node: Any, n: int = n) -> bool:
            return _avg_pool_applies(
                n, input_shape(node), floating_input(node), node.args[1],
                argument(node, 2, "stride", ()),
            )  # fmt: skip

        def adaptive_call(node: Any, n: int = n, average: bool = True) -> bool:
            return _adaptive_applies(
                n, input_shape(node), floating_input(node), node.args[1], average
            )

        def adaptive_max_call(node: Any, n: int = n) -> bool:
            return adaptive_call(node, n, average=False)

        forms[avg.default] = (_avg_pool(torch, n), avg_call)
        forms[adaptive_avg.default] = (_adaptive_avg_pool(torch, n), adaptive_call)
        forms[adaptive_avg_impl.default] = (_adaptive_avg_pool(torch, n), adaptive_call)
        forms[adaptive_max.default] = (_adaptive_max_pool(torch, n), adaptive_max_call)
    return rewrite_calls(exported, forms)
