"""3-D grid sampling in its math form, for a torch whose Inductor has no C shim for it.

`F.grid_sample` on a 5-D input exports as `aten.grid_sampler_3d`. torch has a C shim for
it from 2.13 on; an older torch compiles it through libtorch's proxy executor, which slim
runtimes lack, so compile refused such models (the zoo's `video` on the GPU machine's
torch 2.11). There, compile rewrites each call, before Inductor sees the program, into
gathers and weights that follow ATen's arithmetic (GridSampler.h: unnormalising the grid,
border and reflection padding, trilinear and nearest interpolation), and Inductor
generates the kernel. With a torch that has the shim the program is left alone: the slim
shims serve the op (shims/shim_grid_sample.cpp).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.torchenv import torch_has_c_shim

OP_NAME = "aten.grid_sampler_3d.default"
BILINEAR, NEAREST = 0, 1  # interpolation_mode (bicubic is 2-D only)
ZEROS, BORDER, REFLECTION = 0, 1, 2  # padding_mode


def _grid_sampler_3d(torch: ModuleType) -> Any:
    def unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
        if align_corners:
            return (coord + 1) / 2 * (size - 1)
        return ((coord + 1) * size - 1) / 2

    def reflect(coord: Any, twice_low: int, twice_high: int) -> Any:
        if twice_low == twice_high:
            return torch.zeros_like(coord)
        low = twice_low / 2
        span = (twice_high - twice_low) / 2
        coord = (coord - low).abs()
        extra = torch.fmod(coord, span)
        flips = torch.floor(coord / span)
        return torch.where(torch.fmod(flips, 2) == 0, extra + low, span - extra + low)

    def source_index(coord: Any, size: int, padding: int, align_corners: bool) -> Any:
        coord = unnormalize(coord, size, align_corners)
        if padding == BORDER:
            coord = coord.clamp(0, size - 1)
        elif padding == REFLECTION:
            if align_corners:
                coord = reflect(coord, 0, 2 * (size - 1))
            else:
                coord = reflect(coord, -1, 2 * size - 1)
            coord = coord.clamp(0, size - 1)
        return coord

    def grid_sampler_3d(
        input: Any, grid: Any, interpolation_mode: int, padding_mode: int, align_corners: bool
    ) -> Any:
        n, c, d, h, w = input.shape
        out_shape = grid.shape[1:4]
        flat = input.reshape(n, c, d * h * w)
        x = source_index(grid[..., 0], w, padding_mode, align_corners).reshape(n, -1)
        y = source_index(grid[..., 1], h, padding_mode, align_corners).reshape(n, -1)
        z = source_index(grid[..., 2], d, padding_mode, align_corners).reshape(n, -1)

        def corner(zi: Any, yi: Any, xi: Any, weight: Any) -> Any:
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h) & (zi >= 0) & (zi < d)
            index = (zi.clamp(0, d - 1) * h + yi.clamp(0, h - 1)) * w + xi.clamp(0, w - 1)
            values = flat.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))
            return values * (weight * inside).unsqueeze(1).to(values.dtype)

        if interpolation_mode == NEAREST:
            # ATen rounds half to even (nearbyint), as torch.round does.
            xi, yi, zi = (torch.round(t).long() for t in (x, y, z))
            out = corner(zi, yi, xi, torch.ones_like(x))
        elif interpolation_mode == BILINEAR:
            x0, y0, z0 = (torch.floor(t) for t in (x, y, z))
            fx, fy, fz = x - x0, y - y0, z - z0
            x0, y0, z0 = x0.long(), y0.long(), z0.long()
            out = None
            for dz, wz in ((0, 1 - fz), (1, fz)):
                for dy, wy in ((0, 1 - fy), (1, fy)):
                    for dx, wx in ((0, 1 - fx), (1, fx)):
                        term = corner(z0 + dz, y0 + dy, x0 + dx, wz * wy * wx)
                        out = term if out is None else out + term
        else:
            raise ValueError(f"grid_sampler_3d: interpolation mode {interpolation_mode}")
        return out.reshape(n, c, *out_shape)

    return grid_sampler_3d


def grid_sampler_3d_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every grid_sampler_3d call in its math form, how many calls were
    rewritten). With `only_without_shim` (the default) the program is left alone when the
    installed torch has a C shim for the op."""
    if only_without_shim and torch_has_c_shim(OP_NAME):
        return exported, 0
    aten = torch.ops.aten
    # An exported program may still hold the composite `grid_sampler`, which becomes
    # grid_sampler_3d for a 5-D input when the program is decomposed.
    count = sum(
        1
        for node in exported.graph.nodes
        if node.op == "call_function"
        and node.target in (aten.grid_sampler.default, aten.grid_sampler_3d.default)
        and node.args[0].meta["val"].dim() == 5
    )
    if count == 0:
        return exported, 0
    math_form = _grid_sampler_3d(torch)

    def grid_sampler(input: Any, grid: Any, mode: int, padding: int, align: bool) -> Any:
        if input.dim() == 5:
            return math_form(input, grid, mode, padding, align)
        return aten.grid_sampler_2d(input, grid, mode, padding, align)  # what it dispatches to

    table = {aten.grid_sampler.default: grid_sampler, aten.grid_sampler_3d.default: math_form}
    return exported.run_decompositions(table), count
