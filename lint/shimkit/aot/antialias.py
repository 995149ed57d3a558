"""Antialiased resizing in its math form, for a torch whose Inductor has no C shim for it.

`F.interpolate(x, ..., mode="bilinear" or "bicubic", antialias=True)` (and torchvision's
`Resize` on tensors, antialiased by default) exports as `aten._upsample_bilinear2d_aa` or
`aten._upsample_bicubic2d_aa`. No torch so far has a C shim for either: Inductor compiles
them through libtorch's proxy executor, which slim runtimes lack, so compile refused such
models. The op is linear and separable: each (n, c) plane is resized as Wh @ x @ Ww^T, with
weight matrices that depend only on the sizes, align_corners and the scales. Compile
rewrites each call into those two matrix products, the weights computed in the program from
ATen's formula (UpSampleKernel.cpp: PIL's antialiasing filters, a triangle for bilinear and
the a = -0.5 cubic for bicubic, stretched by the scale when downsampling, each row
normalised to sum to one; evaluated once, at compile: `fold_size_only_values`), and Inductor
generates the kernels. Only calls whose spatial sizes are static are rewritten (the weights'
shapes are those sizes); a program with another keeps the op, and compile's check names it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.constants import fold_size_only_values
from shimkit.aot.torchenv import torch_has_c_shim

# The ops and their taps per output element at scale 1 (ATen's interp_size).
OPS = {"_upsample_bilinear2d_aa": 2, "_upsample_bicubic2d_aa": 4}
BICUBIC_A = -0.5  # PIL's cubic, which ATen's antialiased bicubic uses (not -0.75)


def _triangle(torch: ModuleType, x: Any) -> Any:
    """The bilinear filter."""
    x = x.abs()
    return torch.where(x < 1, 1 - x, torch.zeros_like(x))


def _cubic(torch: ModuleType, x: Any) -> Any:
    """The bicubic filter (a = BICUBIC_A)."""
    a = BICUBIC_A
    x = x.abs()
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return torch.where(x < 1, near, torch.where(x < 2, far, torch.zeros_like(x)))


FILTERS = {"_upsample_bilinear2d_aa": _triangle, "_upsample_bicubic2d_aa": _cubic}


def _weights(
    torch: ModuleType,
    op: str,
    in_size: int,
    out_size: int,
    align_corners: bool,
    scale: Any,
    device: Any,
) -> Any:
    """The [out_size, in_size] float64 matrix ATen's antialiased resize applies along one
    dim (area_pixel_compute_scale, then _compute_indices_min_size_weights_aa per row), on
    `device` (the input's: a CUDA program computes its weights on the GPU)."""
    if in_size == out_size:  # ATen leaves such a dim as it is, whatever the scale
        return torch.eye(in_size, dtype=torch.float64, device=device)
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    elif scale is not None and scale > 0:
        step = 1.0 / scale
    else:
        step = in_size / out_size
    support = OPS[op] * 0.5 * (step if step >= 1.0 else 1.0)
    inverse = 1.0 / step if step >= 1.0 else 1.0
    rows = torch.arange(out_size, dtype=torch.float64, device=device).unsqueeze(1)
    cols = torch.arange(in_size, dtype=torch.float64, device=device).unsqueeze(0)
    center = step * (rows + 0.5)
    first = torch.clamp(torch.trunc(center - support + 0.5), min=0)
    end = torch.clamp(torch.trunc(center + support + 0.5), max=in_size)
    taps = FILTERS[op](torch, (cols - center + 0.5) * inverse)
    taps = torch.where((cols >= first) & (cols < end), taps, torch.zeros_like(taps))
    total = taps.sum(1, keepdim=True)
    return torch.where(total != 0, taps / total, taps)


def _resize(torch: ModuleType, op: str) -> Any:
    def resize(
        x: Any, output_size: Any, align_corners: bool, scales_h: Any = None, scales_w: Any = None
    ) -> Any:
        (in_h, in_w), (out_h, out_w) = x.shape[-2:], output_size
        wh = _weights(torch, op, in_h, out_h, align_corners, scales_h, x.device).to(x.dtype)
        ww = _weights(torch, op, in_w, out_w, align_corners, scales_w, x.device).to(x.dtype)
        return torch.matmul(torch.matmul(wh, x), ww.t())

    return resize


def _resize_vec(resize: Any) -> Any:
    """The `.vec` overload: an output size, or scale factors it follows from (ATen floors
    size * factor)."""

    def resize_vec(x: Any, output_size: Any, align_corners: bool, scale_factors: Any) -> Any:
        if output_size is None:
            output_size = [int(s * f) for s, f in zip(x.shape[-2:], scale_factors, strict=True)]
        scales = scale_factors if scale_factors is not None else (None, None)
        return resize(x, output_size, align_corners, scales[0], scales[1])

    return resize_vec


def _is_static(node: Any) -> bool:
    """Whether a call's input has static spatial sizes and its output size is static."""
    spatial = node.args[0].meta["val"].shape[-2:]
    output_size = node.args[1] if len(node.args) > 1 else None
    return all(type(s) is int for s in spatial) and (
        output_size is None or all(type(s) is int for s in output_size)
    )


def antialiased_resize_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every antialiased bilinear and bicubic resize in its math form, how
    many calls were rewritten). With `only_without_shim` (the default) an op is left alone
    when the installed torch has a C shim for it; a program with a call whose sizes are not
    static is left alone too."""
    aten = torch.ops.aten
    table: dict[Any, Any] = {}
    for op in OPS:
        if only_without_shim and torch_has_c_shim(f"aten.{op}.default"):
            continue
        packet = getattr(aten, op)
        table[packet.default] = _resize(torch, op)
        table[packet.vec] = _resize_vec(table[packet.default])
    calls = [
        node for node in exported.graph.nodes if node.op == "call_function" and node.target in table
    ]
    if not calls or not all(_is_static(node) for node in calls):
        return exported, 0
    rewritten = exported.run_decompositions(table)
    fold_size_only_values(torch, rewritten, "shimkit_resize_weights")
    return rewritten, len(calls)
