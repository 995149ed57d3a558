"""Average pooling over large windows in its math form (shimkit.aot.avg_pool).

For slim CUDA targets compile rewrites the average pools Inductor leaves to ATen fallbacks
(windows over 25 elements), which the slim CUDA shims would run on the host, into one
matrix product per pooled dim. Here: the math form against torch's own ops in float64 (2-D
and 3-D; kernel, stride, padding, ceil_mode, count_include_pad, divisor_override; adaptive
pools with windows of uneven sizes; unbatched input), only large windows are rewritten
(adaptive pools to size one become means), a program with a small window or dynamic pooled
dims is left alone (controls: as exported the program holds the ops), the rewritten
program builds its matrices on the input's device, and a compiled model with the rewrite
runs on the slim CPU runtime next to eager.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Pool(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Any:
        return self.fn(x) * 2.0


def pool_ops(exported: Any) -> list[str]:
    return [
        str(node.target)
        for node in exported.graph.nodes
        if node.op == "call_function" and "avg_pool" in str(node.target)
    ]


CASES = {
    "avg2d": (lambda x: F.avg_pool2d(x, 6, 4), (2, 3, 17, 17)),
    "avg2d_pad_no_count": (lambda x: F.avg_pool2d(x, (7, 5), (3, 2), (3, 2), False, False),
                           (2, 3, 17, 14)),
    "avg2d_ceil": (lambda x: F.avg_pool2d(x, 6, 4, 2, True, True), (1, 2, 19, 23)),
    "avg2d_ceil_no_count": (lambda x: F.avg_pool2d(x, 6, 4, 3, True, False), (1, 2, 19, 23)),
    "avg2d_divisor": (lambda x: F.avg_pool2d(x, 6, 3, 1, divisor_override=7), (2, 3, 16, 16)),
    "avg2d_unbatched": (lambda x: F.avg_pool2d(x, 9, 2), (3, 20, 21)),
    "avg3d": (lambda x: F.avg_pool3d(x, 3, 2, 1), (2, 3, 6, 9, 9)),
    "avg3d_no_count_ceil": (lambda x: F.avg_pool3d(x, (3, 4, 3), 2, 1, True, False),
                            (1, 2, 7, 8, 9)),
    "adaptive2d_uneven": (lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (2, 3, 17, 17)),
    "adaptive2d_up": (lambda x: F.adaptive_avg_pool2d(x, (2, 40)), (2, 3, 30, 17)),
    "adaptive3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)), (2, 3, 6, 13, 11)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_math_form_matches_torch(name: str) -> None:
    from shimkit.aot.avg_pool import avg_pools_in_math_form

    fn, shape = CASES[name]
    torch.manual_seed(3)
    x = torch.randn(*shape, dtype=torch.float64)
    model = Pool(fn).eval()
    exported = torch.export.export(model, (x,))
    assert pool_ops(exported)  # control: the program holds the pool
    rewritten, count = avg_pools_in_math_form(torch, exported)
    assert count == 1 and pool_ops(rewritten) == []
    got, want = rewritten.module()(x), model(x)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=0, atol=1e-12), (got - want).abs().max()


class Pyramid(torch.nn.Module):
    """A pyramid pooling module: adaptive pools to 1, 2, 3 and 6 of a 30x30 map, upsampled
    and concatenated (PSPNet's), plus a 7x7 average pool."""

    def forward(self, x: Any) -> Any:
        levels = [F.adaptive_avg_pool2d(x, s) for s in (1, 2, 3, 6)]
        up = [F.interpolate(level, size=x.shape[-2:], mode="nearest") for level in levels]
        return torch.cat([x, *up], 1), F.avg_pool2d(x, 7, 7)


def test_pyramid_large_windows_rewritten_the_mean_kept_as_a_mean() -> None:
    from shimkit.aot.avg_pool import avg_pools_in_math_form

    x = torch.randn(2, 4, 30, 30)
    exported = torch.export.export(Pyramid().eval(), (x,))
    rewritten, count = avg_pools_in_math_form(torch, exported)
    # The pool to 6 has windows of 5x5 = 25 elements, which Inductor generates itself, so
    # the program is left alone (the decomposition would take every call of the op).
    assert count == 0 and rewritten is exported

    # Without that level the pools to 2 and 3 (15x15 and 10x10 windows) and the 7x7 pool
    # are rewritten; the pool to one becomes a mean.
    class Large(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            levels = [F.adaptive_avg_pool2d(x, s) for s in (1, 2, 3)]
            return [*levels, F.avg_pool2d(x, 7, 7)]

    model = Large().eval()
    exported = torch.export.export(model, (x,))
    rewritten, count = avg_pools_in_math_form(torch, exported)
    assert count == 3 and pool_ops(rewritten) == []
    for got, want in zip(rewritten.module()(x), model(x), strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def test_small_windows_and_dynamic_sizes_are_left_alone() -> None:
    from shimkit.aot.avg_pool import avg_pools_in_math_form

    x = torch.randn(2, 3, 17, 17)
    small = torch.export.export(Pool(lambda x: F.avg_pool2d(x, 5, 2)).eval(), (x,))
    assert avg_pools_in_math_form(torch, small) == (small, 0)  # 25 elements: Inductor's
    model = Pool(lambda x: F.avg_pool2d(x, 6, 4)).eval()
    height = torch.export.Dim("height", min=12, max=64)
    dynamic = torch.export.export(model, (x,), dynamic_shapes=({2: height},))
    assert avg_pools_in_math_form(torch, dynamic) == (dynamic, 0)
    # Control: a dynamic batch is fine.
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    rewritten, count = avg_pools_in_math_form(torch, exported)
    assert count == 1
    x5 = torch.randn(5, 3, 17, 17)
    assert torch.allclose(rewritten.module()(x5), model(x5), atol=1e-5)


def test_matrices_are_made_on_the_input_device() -> None:
    from shimkit.aot.avg_pool import avg_pools_in_math_form

    model = Pool(lambda x: F.adaptive_avg_pool2d(x, (3, 5))).eval()
    exported = torch.export.export(model, (torch.empty(2, 3, 17, 17, device="meta"),))
    rewritten, count = avg_pools_in_math_form(torch, exported)
    devices = {
        str(node.meta["val"].device)
        for node in rewritten.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }
    assert count == 1 and devices == {"meta"}


class RegionPool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: Any) -> Any:
        h = torch.relu(self.conv(x))
        return F.adaptive_avg_pool2d(h, (3, 5)), F.avg_pool2d(h, 6, 4, 1, True, False)


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import numpy as np
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported, in_math_form

    torch.manual_seed(8)
    model = RegionPool().eval()
    inputs = (torch.randn(2, 3, 17, 17),)
    # As for a slim CUDA target (here compiled for the slim CPU runtime, which runs it too).
    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, True)
    assert notes == [
        "2 average pool call(s) over windows of more than 25 elements compiled as matrix "
        "products (Inductor generates the kernels; no host fallback)"
    ]
    result = compile_exported(exported, tmp_path / "pool.pt2", force=True, show_progress=False)
    imports = [sym.name for blob in result.blobs.values() for sym in blob.imports]
    assert any("aoti_torch_" in name for name in imports)  # control: the imports are read
    assert not any("avg_pool" in name for name in imports)
    with shimkit.runtime.load(result.path) as slim:
        got = slim(*inputs)
    for g, w in zip(got, model(*inputs), strict=True):
        assert np.allclose(g, w.detach().numpy(), rtol=1e-4, atol=1e-5)
