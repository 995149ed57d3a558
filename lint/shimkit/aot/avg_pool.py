"""Average pooling over large windows in its math form, for slim CUDA targets.

Inductor generates a pooling kernel itself only for windows up to 25 elements; a larger
`avg_pool2d`/`avg_pool3d` or `adaptive_avg_pool2d`/`3d` (a pyramid pooling module, a
region pool) stays an ATen fallback. The slim CUDA shims have no device kernel for those
and run them on the host: eagerly each call synchronises, and in a CUDA graph each is a
host step the GPU waits for. Average pooling is linear and separable: along each pooled
dim, output element i is a weighted sum of the input elements of its window. So for a slim
CUDA target compile rewrites each call whose spatial sizes are static into one matrix
product per pooled dim, the matrices built in the program from ATen's window arithmetic
(pooling_output_shape; the windows clipped to the padded and then to the real input; the
divisor the product of the per-dim counts, with or without the padding, or
divisor_override; adaptive windows from floor(i * in / out) to ceil((i + 1) * in / out)),
and Inductor generates the kernels (GEMMs on cuBLASLt). On the CPU the slim shims pool
directly, so the program is left alone there.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

# The ops rewritten, and how many trailing dims each pools.
POOLS = {"avg_pool2d": 2, "avg_pool3d": 3, "_adaptive_avg_pool2d": 2, "_adaptive_avg_pool3d": 3}


def _output_size(size: int, kernel: int, pad: int, stride: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape (dilation 1)."""
    span = size + 2 * pad - (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = math.floor(span / stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _window_matrix(torch: ModuleType, starts: Any, ends: Any, size: int, device: Any) -> Any:
    """A [len(starts), size] float64 matrix with ones where start <= column < end."""
    cols = torch.arange(size, device=device).unsqueeze(0)
    inside = (cols >= starts.unsqueeze(1)) & (cols < ends.unsqueeze(1))
    return inside.to(torch.float64)


def _avg_matrix(
    torch: ModuleType,
    size: int,
    kernel: int,
    stride: int,
    pad: int,
    ceil_mode: bool,
    count_include_pad: bool,
    device: Any,
) -> tuple[Any, Any]:
    """(the 0/1 window matrix along one dim, each output element's count along it: the
    window within the padded input, or within the input alone)."""
    out = _output_size(size, kernel, pad, stride, ceil_mode)
    starts = torch.arange(out, device=device) * stride - pad
    ends = torch.clamp(starts + kernel, max=size + pad)
    padded_counts = ends - starts
    starts, ends = torch.clamp(starts, min=0), torch.clamp(ends, max=size)
    counts = padded_counts if count_include_pad else ends - starts
    return _window_matrix(torch, starts, ends, size, device), counts.to(torch.float64)


def _adaptive_matrix(torch: ModuleType, size: int, out: int, device: Any) -> Any:
    """Adaptive average pooling along one dim: each row averages its window."""
    index = torch.arange(out, device=device)
    starts = torch.div(index * size, out, rounding_mode="floor")
    ends = torch.div((index + 1) * size + out - 1, out, rounding_mode="floor")
    window = _window_matrix(torch, starts, ends, size, device)
    return window / (ends - starts).to(torch.float64).unsqueeze(1)


def _along(torch: ModuleType, x: Any, dim: int, matrix: Any) -> Any:
    """x with dim `dim` (negative) replaced by matrix @ that dim."""
    moved = torch.movedim(x, dim, -1)
    return torch.movedim(torch.matmul(moved, matrix.t().to(x.dtype)), -1, dim)


def _as_list(values: Any, n: int) -> list[int]:
    values = list(values) if values else []
    return values * n if len(values) == 1 else values


def _avg_pool(torch: ModuleType, dims: int) -> Any:
    def avg_pool(
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: Any = None,
    ) -> Any:
        kernel, strides, pads = _avg_pool_geometry(dims, kernel_size, stride, padding)
        for i in range(dims):
            dim = i - dims
            window, count = _avg_matrix(torch, x.shape[dim], kernel[i], strides[i], pads[i],
                                        ceil_mode, count_include_pad, x.device)  # fmt: skip
            if divisor_override is None:
                # A window wholly in the padding has no element and a count of zero (ATen
                # writes 0 there).
                window = window / torch.clamp(count, min=1).unsqueeze(1)
            x = _along(torch, x, dim, window)
        return x if divisor_override is None else x / divisor_override

    return avg_pool


def _avg_pool_geometry(
    dims: int, kernel_size: Any, stride: Any, padding: Any
) -> tuple[list[int], list[int], list[int]]:
    """Per pooled dim: kernel, stride (the kernel's when none is given, as ATen) and padding."""
    kernel = _as_list(kernel_size, dims)
    strides = _as_list(stride, dims) or kernel
    pads = _as_list(padding if isinstance(padding, (list, tuple)) else [padding], dims)
    return kernel, strides, pads


def _adaptive_avg_pool(torch: ModuleType, dims: int) -> Any:
    def adaptive_avg_pool(x: Any, output_size: Any) -> Any:
        sizes = _as_list(output_size, dims)
        if all(out == 1 for out in sizes):  # a mean, which is how Inductor lowers it too
            return x.mean(list(range(-dims, 0)), keepdim=True)
        for i, out in enumerate(sizes):
            dim = i - dims
            x = _along(torch, x, dim, _adaptive_matrix(torch, x.shape[dim], out, x.device))
        return x

    return adaptive_avg_pool


# Inductor generates a pool itself when its window has at most this many elements.
INDUCTOR_WINDOW_LIMIT = 25


def _call_kind(node: Any, dims: int, adaptive: bool) -> str:
    """ "large": a pool over windows of more input elements than Inductor generates itself
    (rewritten into matrix products); "mean": an adaptive pool to size one (a mean, as
    Inductor lowers it); "other": a small window, or pooled dims that are not static."""
    sizes = node.args[0].meta["val"].shape[-dims:]
    if not all(type(s) is int for s in sizes):
        return "other"
    outs_or_kernel = _as_list(node.args[1], dims)
    if adaptive and all(out == 1 for out in outs_or_kernel):
        return "mean"
    if adaptive:
        # Adaptive windows span floor(i * in / out) to ceil((i + 1) * in / out).
        spans = [max(-(-(i + 1) * s // o) - (i * s // o) for i in range(o))
                 for s, o in zip(sizes, outs_or_kernel, strict=True)]  # fmt: skip
    else:
        spans = outs_or_kernel
    return "large" if math.prod(spans) > INDUCTOR_WINDOW_LIMIT else "other"


def avg_pools_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with its average pools over windows larger than Inductor generates
    itself in their math form, how many such calls were rewritten). Adaptive pools to size
    one become means, as Inductor lowers them. A program with another average pool (not
    static, or a small window Inductor would generate) is left alone: the decomposition
    covers every call of an op, and the small ones are better as Inductor's kernels."""
    aten = torch.ops.aten
    table: dict[Any, Any] = {}
    kind: dict[Any, tuple[int, bool]] = {}
    for op, dims in POOLS.items():
        adaptive = "adaptive" in op
        # The composite adaptive pools an exported program may still hold, too.
        names = [op, op.lstrip("_")] if adaptive else [op]
        for name in names:
            target = getattr(aten, name).default
            table[target] = (_adaptive_avg_pool if adaptive else _avg_pool)(torch, dims)
            kind[target] = (dims, adaptive)
    calls = [n for n in exported.graph.nodes if n.op == "call_function" and n.target in table]
    kinds = [_call_kind(n, *kind[n.target]) for n in calls]
    if "large" not in kinds or "other" in kinds:
        return exported, 0
    return exported.run_decompositions(table), kinds.count("large")
