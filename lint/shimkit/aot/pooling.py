"""2-D pools over windows of more than 25 elements as masked reductions, for slim CUDA blobs.

Inductor generates 2-D pooling kernels for windows of up to 25 elements; beyond that it
leaves max pools (with or without indices), average pools whose stride differs from their
kernel, and adaptive pools whose largest window is that big to ATen's kernels, which a blob
reaches through their shims. The slim CUDA shims run those on the host: a round trip per
call, and a run that cannot be captured whole in a CUDA graph (spatial pyramid pooling with
9x9 and 13x13 windows, or regions pooled into tokens). For a slim CUDA target compile
rewrites such calls into reductions Inductor generates, one spatial dim at a time: each
output's window along a dim is a mask over the input's positions (start and end as ATen
computes them: kernel, stride, padding and ceil_mode, or adaptive), and the masked elements
are reduced along that dim, then along the other. A max pool reduces the columns first and
its index is its row times the width plus its column: the first largest value in row-major
order, as ATen scans (the first row holding the window's maximum, at its first column), and
a window holding only -inf names its first element, as in ATen; where a window holds NaN
the value is NaN as in ATen, and the index names one of its NaNs (ATen's names the last).
An average divides the window's sum by ATen's divisor (padding counted or not, or the
override). The masks make the work of a pass the output's positions times the input's
along its dim: calls whose larger pass would exceed `DENSE_LIMIT` elements, with dilation,
or with dynamic sizes keep the fallback.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import (
    argument,
    floating_input,
    input_shape,
    rewrite_calls,
    static_numel,
)

# Inductor's largest pooling window (elements) before it falls back (torch 2.11, 2.13).
INDUCTOR_WINDOW_LIMIT = 25
# The most elements one masked pass may reduce over (16 MiB of float32).
DENSE_LIMIT = 4 * 1024 * 1024


def _pair(value: Any, default: Any = None) -> tuple[int, int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return value, value
    return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])


def _pooled_size(length: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape (dilation 1)."""
    out = (length + 2 * padding - kernel + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1
    return out


def _fixed_windows(
    torch: ModuleType, out: int, kernel: int, stride: int, padding: int, device: Any
) -> tuple[Any, Any]:
    """The unclipped [start, end) of each of `out` fixed windows (padding included)."""
    starts = torch.arange(out, device=device) * stride - padding
    return starts, starts + kernel


def _adaptive_windows(torch: ModuleType, out: int, length: int, device: Any) -> tuple[Any, Any]:
    """ATen's adaptive [start, end) of each of `out` windows over `length` elements."""
    index = torch.arange(out, device=device)
    return (index * length) // out, ((index + 1) * length + out - 1) // out


def _mask(torch: ModuleType, starts: Any, ends: Any, length: int) -> Any:
    """[out, length]: which elements each window holds (padding is outside the input)."""
    positions = torch.arange(length, device=starts.device)
    return (positions >= starts[:, None]) & (positions < ends[:, None])


def _within_window(torch: ModuleType, index: Any, first: Any) -> Any:
    """A max's index moved to its window's first element where it fell before it: the
    first occurrence of -inf, when the whole window is -inf, can be a masked position."""
    return torch.maximum(index, first)


def _masked_max(torch: ModuleType, x: Any, rows: Any, columns: Any) -> tuple[Any, Any]:
    """The max over each window of `x`'s last two dims, and its row-major index (the first
    largest in row-major order, as ATen scans; the window's first element when all are
    -inf). Columns are reduced first, so each row's maximum comes with its first column, and
    then the first row holding the window's maximum picks its column."""
    width = x.shape[-1]
    row_starts = rows.to(torch.int64).argmax(-1)  # each window's first row, [out_h]
    column_starts = columns.to(torch.int64).argmax(-1)
    # Columns: [..., H, out_w] maxima and the column each came from.
    picked = torch.where(columns, x.unsqueeze(-2), float("-inf"))
    values, where_column = picked.max(-1)
    where_column = _within_window(torch, where_column, column_starts)
    # Rows: [..., out_h, out_w], and the column of the chosen row.
    picked = torch.where(rows[:, :, None], values.unsqueeze(-3), float("-inf"))
    values, where_row = picked.max(-2)
    where_row = _within_window(torch, where_row, row_starts[:, None])
    column = where_column.gather(-2, where_row)
    return values, where_row * width + column


def _masked_sum(torch: ModuleType, x: Any, rows: Any, columns: Any) -> Any:
    summed = torch.where(rows[:, :, None], x.unsqueeze(-3), 0).sum(-2)  # [..., out_h, W]
    return torch.where(columns, summed.unsqueeze(-2), 0).sum(-1)  # [..., out_h, out_w]


def _max_pool(torch: ModuleType) -> Any:
    def max_pool2d_with_indices(
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> tuple[Any, Any]:
        if not _max_pool_applies(
            tuple(x.shape), x.is_floating_point(), kernel_size, stride, dilation
        ):
            return NotImplemented
        kernel, steps, pads = _pair(kernel_size), _pair(stride, kernel_size), _pair(padding)
        masks = []
        for dim in (0, 1):
            length = x.shape[dim - 2]
            out = _pooled_size(length, kernel[dim], steps[dim], pads[dim], ceil_mode)
            starts, ends = _fixed_windows(torch, out, kernel[dim], steps[dim], pads[dim], x.device)
            masks.append(_mask(torch, starts, ends, length))
        return _masked_max(torch, x, *masks)

    return max_pool2d_with_indices


def _plain_max_pool(torch: ModuleType) -> Any:
    pooled = _max_pool(torch)

    def max_pool2d(
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> Any:
        result = pooled(x, kernel_size, stride, padding, dilation, ceil_mode)
        return result if result is NotImplemented else result[0]

    return max_pool2d


def _avg_pool(torch: ModuleType) -> Any:
    def avg_pool2d(
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Any:
        if not _avg_pool_applies(tuple(x.shape), x.is_floating_point(), kernel_size, stride):
            return NotImplemented
        kernel, steps, pads = _pair(kernel_size), _pair(stride, kernel_size), _pair(padding)
        masks, counts = [], []
        for dim in (0, 1):
            length = x.shape[dim - 2]
            out = _pooled_size(length, kernel[dim], steps[dim], pads[dim], ceil_mode)
            starts, ends = _fixed_windows(torch, out, kernel[dim], steps[dim], pads[dim], x.device)
            ends = ends.clamp(max=length + pads[dim])  # ATen's window, padding included
            if count_include_pad:
                counts.append(ends - starts)
            else:
                counts.append(ends.clamp(max=length) - starts.clamp(min=0))
            masks.append(_mask(torch, starts, ends, length))
        summed = _masked_sum(torch, x, *masks)
        if divisor_override:
            return summed / divisor_override
        return summed / (counts[0][:, None] * counts[1][None, :]).to(x.dtype)

    return avg_pool2d


def _adaptive_masks(torch: ModuleType, x: Any, output_size: Any) -> tuple[Any, Any, Any]:
    masks, counts = [], []
    for dim in (0, 1):
        length = x.shape[dim - 2]
        starts, ends = _adaptive_windows(torch, output_size[dim], length, x.device)
        masks.append(_mask(torch, starts, ends, length))
        counts.append(ends - starts)
    return masks[0], masks[1], counts[0][:, None] * counts[1][None, :]


def _adaptive_avg_pool(torch: ModuleType) -> Any:
    def adaptive_avg_pool2d(x: Any, output_size: Any) -> Any:
        if not _adaptive_applies(tuple(x.shape), x.is_floating_point(), output_size):
            return NotImplemented
        rows, columns, counts = _adaptive_masks(torch, x, output_size)
        return _masked_sum(torch, x, rows, columns) / counts.to(x.dtype)

    return adaptive_avg_pool2d


def _adaptive_max_pool(torch: ModuleType) -> Any:
    def adaptive_max_pool2d(x: Any, output_size: Any) -> tuple[Any, Any]:
        if not _adaptive_applies(tuple(x.shape), x.is_floating_point(), output_size):
            return NotImplemented
        rows, columns, _ = _adaptive_masks(torch, x, output_size)
        return _masked_max(torch, x, rows, columns)

    return adaptive_max_pool2d


def _passes_fit(shape: tuple[Any, ...], out_h: int, out_w: int) -> bool:
    """Whether both masked passes over `shape` (its last two dims pooled) fit DENSE_LIMIT."""
    numel = static_numel(shape)
    if numel is None or len(shape) not in (3, 4):
        return False
    height, width = shape[-2], shape[-1]
    planes = numel // max(1, height * width)
    # The max pools reduce the columns first, [..., H, out_w, W]; the sums the rows first,
    # [..., out_h, H, W]; the second passes are no larger than the first.
    return planes * height * width * max(out_h, out_w) <= DENSE_LIMIT


def _poolable(shape: Any, floating: bool) -> bool:
    """A floating-point 3-D or 4-D input of static shape (the masks fill with -inf)."""
    return floating and static_numel(shape) is not None and len(shape) in (3, 4)


def _max_pool_applies(
    shape: Any, floating: bool, kernel_size: Any, stride: Any, dilation: Any
) -> bool:
    if not _poolable(shape, floating):
        return False
    kernel, steps = _pair(kernel_size), _pair(stride, kernel_size)
    if _pair(dilation) != (1, 1) or kernel[0] * kernel[1] <= INDUCTOR_WINDOW_LIMIT:
        return False
    return _passes_fit(shape, shape[-2] // steps[0] + 1, shape[-1] // steps[1] + 1)


def _avg_pool_applies(shape: Any, floating: bool, kernel_size: Any, stride: Any) -> bool:
    if not _poolable(shape, floating):
        return False
    kernel, steps = _pair(kernel_size), _pair(stride, kernel_size)
    if kernel[0] * kernel[1] <= INDUCTOR_WINDOW_LIMIT or kernel == steps:
        return False  # a window Inductor pools itself, or a plain reduction
    return _passes_fit(shape, shape[-2] // steps[0] + 1, shape[-1] // steps[1] + 1)


def _adaptive_applies(shape: Any, floating: bool, output_size: Any) -> bool:
    if not _poolable(shape, floating):
        return False
    (height, width), (out_h, out_w) = shape[-2:], _pair(output_size)
    if out_h == 0 or out_w == 0:
        return False
    if height % out_h == 0 and width % out_w == 0:
        return False  # equal windows: Inductor's own average pool or decomposition
    largest = -(-(height + out_h - 1) // out_h) * -(-(width + out_w - 1) // out_w)
    if largest <= INDUCTOR_WINDOW_LIMIT:  # Inductor's estimate, as it decides
        return False
    return _passes_fit(shape, out_h, out_w)


def pools_in_masked_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every 2-D pool Inductor would leave to its fallback in its masked
    form, where the passes fit DENSE_LIMIT, how many calls were rewritten). For slim CUDA
    blobs only: the slim CPU shims pool natively."""
    aten = torch.ops.aten

    def max_call(node: Any) -> bool:
        return _max_pool_applies(
            input_shape(node), floating_input(node), node.args[1], argument(node, 2, "stride", ()),
            argument(node, 4, "dilation", 1),
        )  # fmt: skip

    def avg_call(node: Any) -> bool:
        return _avg_pool_applies(
            input_shape(node), floating_input(node), node.args[1], argument(node, 2, "stride", ())
        )

    def adaptive_call(node: Any) -> bool:
        return _adaptive_applies(input_shape(node), floating_input(node), node.args[1])

    return rewrite_calls(
        exported,
        {
            aten.max_pool2d.default: (_plain_max_pool(torch), max_call),
            aten.max_pool2d_with_indices.default: (_max_pool(torch), max_call),
            aten.avg_pool2d.default: (_avg_pool(torch), avg_call),
            aten.adaptive_avg_pool2d.default: (_adaptive_avg_pool(torch), adaptive_call),
            aten._adaptive_avg_pool2d.default: (_adaptive_avg_pool(torch), adaptive_call),
            aten.adaptive_max_pool2d.default: (_adaptive_max_pool(torch), adaptive_call),
        },
    )
