"""3-D grid sampling in its math form (shimkit.aot.grid_sample).

A torch older than 2.13 has no C shim for `aten.grid_sampler_3d` (the GPU machine's 2.11
compiles it through libtorch's proxy executor), so compile rewrites it into gathers and
weights there. Here: the math form against torch's own op for every mode (trilinear and
nearest; zeros, border and reflection padding; both align_corners; coordinates outside
the volume), the rewrite leaves no grid_sampler_3d in the program (control: as exported
it holds one), it is left alone where torch has the shim, and a compiled model with the
rewrite runs on the slim CPU runtime and matches eager.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Warp(torch.nn.Module):
    def __init__(self, mode: str, padding: str, align_corners: bool) -> None:
        super().__init__()
        self.mode, self.padding, self.align_corners = mode, padding, align_corners

    def forward(self, x: Any, grid: Any) -> Any:
        return F.grid_sample(x, grid, self.mode, self.padding, self.align_corners) * 2.0


def grid_ops(exported: Any) -> list[str]:
    return [
        str(node.target)
        for node in exported.graph.nodes
        if node.op == "call_function" and "grid_sampler" in str(node.target)
    ]


def example(dtype: Any = torch.float32) -> tuple[Any, Any]:
    torch.manual_seed(9)
    x = torch.randn(2, 3, 4, 5, 6, dtype=dtype)
    grid = torch.rand(2, 3, 4, 5, 3, dtype=dtype) * 2.6 - 1.3  # some outside [-1, 1]
    grid[0, 0, 0, 0] = torch.tensor([1.0, -1.0, 0.0])  # on the edges exactly
    return x, grid


CASES = list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"],
                               [False, True]))  # fmt: skip


@pytest.mark.parametrize("mode,padding,align_corners", CASES)
def test_math_form_matches_torch(mode: str, padding: str, align_corners: bool) -> None:
    from shimkit.aot.grid_sample import grid_sampler_3d_in_math_form

    inputs = example(torch.float64)
    model = Warp(mode, padding, align_corners).eval()
    exported = torch.export.export(model, inputs)
    # Control: as exported, the program holds the op (still composite: grid_sampler).
    assert grid_ops(exported) == ["aten.grid_sampler.default"]
    rewritten, count = grid_sampler_3d_in_math_form(torch, exported, only_without_shim=False)
    assert count == 1 and grid_ops(rewritten) == []
    got = rewritten.module()(*inputs)
    want = model(*inputs)
    assert torch.allclose(got, want, rtol=0, atol=1e-12), (got - want).abs().max()


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import grid_sample

    exported = torch.export.export(Warp("bilinear", "zeros", False).eval(), example())
    monkeypatch.setattr(grid_sample, "torch_has_c_shim", lambda name: True)
    same, count = grid_sample.grid_sampler_3d_in_math_form(torch, exported)
    assert count == 0 and same is exported
    # Control: a torch without the shim (older than 2.13) gets the rewrite.
    monkeypatch.setattr(grid_sample, "torch_has_c_shim", lambda name: False)
    rewritten, count = grid_sample.grid_sampler_3d_in_math_form(torch, exported)
    assert count == 1 and grid_ops(rewritten) == []


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from shimkit.aot import grid_sample

    from tests.aot.math_form_run import compile_in_math_form_and_run

    monkeypatch.setattr(grid_sample, "torch_has_c_shim", lambda name: False)
    inputs = example()
    model = Warp("bilinear", "reflection", False).eval()
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "warp.pt2")
    assert run.notes == [
        "1 grid_sampler_3d call(s) compiled in their math form (this torch has no C shim for "
        "it; Inductor generates the kernel)"
    ]
    assert any("aoti_torch_" in name for name in run.imports)  # control: imports are read
    assert not any("grid_sampler" in name for name in run.imports)
    assert np.allclose(run.outputs[0], model(*inputs).numpy(), rtol=1e-4, atol=1e-5)
