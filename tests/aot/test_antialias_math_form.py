"""Antialiased resizing in its math form (shimkit.aot.antialias).

No torch has a C shim for `aten._upsample_bilinear2d_aa` or `_upsample_bicubic2d_aa`, so a
model with `F.interpolate(..., antialias=True)` compiled into a blob that needs libtorch's
proxy executor. Compile now rewrites each call into two matrix products with ATen's
weights. Here: the math form against torch's own op in float64 (downsampling and
upsampling, sizes or scale factors, align_corners, a dim left as it is, sizes of one), the
rewrite leaves no antialiased op in the program (control: as exported it holds them), a
program with dynamic spatial sizes is left alone, and a compiled model runs on the slim
CPU runtime next to eager (control: without the rewrite, compile refuses it naming the op).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Resize(torch.nn.Module):
    def __init__(self, mode: str, align_corners: bool, **how: Any) -> None:
        super().__init__()
        self.mode, self.align_corners, self.how = mode, align_corners, how

    def forward(self, x: Any) -> Any:
        y = F.interpolate(
            x, mode=self.mode, align_corners=self.align_corners, antialias=True, **self.how
        )
        return y * 2.0


def aa_ops(exported: Any) -> list[str]:
    return [
        str(node.target)
        for node in exported.graph.nodes
        if node.op == "call_function" and "_aa" in str(node.target)
    ]


CASES = [
    ("bilinear", False, {"size": (10, 7)}),  # down in both dims
    ("bicubic", False, {"size": (10, 7)}),
    ("bilinear", True, {"size": (41, 5)}),  # up in one dim, down in the other
    ("bicubic", True, {"size": (41, 5)}),
    ("bilinear", False, {"scale_factor": 0.37}),  # the scale is what ATen uses, not the sizes
    ("bicubic", False, {"scale_factor": (2.5, 0.5)}),
    ("bilinear", False, {"size": (23, 4)}),  # height kept as it is
    ("bicubic", False, {"size": (1, 1)}),
    ("bilinear", True, {"size": (1, 9)}),
]


@pytest.mark.parametrize("mode,align_corners,how", CASES)
def test_math_form_matches_torch(mode: str, align_corners: bool, how: dict[str, Any]) -> None:
    from shimkit.aot.antialias import antialiased_resize_in_math_form

    torch.manual_seed(5)
    x = torch.randn(2, 3, 23, 17, dtype=torch.float64)
    model = Resize(mode, align_corners, **how).eval()
    exported = torch.export.export(model, (x,))
    assert aa_ops(exported) == [f"aten._upsample_{mode}2d_aa.vec"]  # control
    rewritten, count = antialiased_resize_in_math_form(torch, exported, only_without_shim=False)
    assert count == 1 and aa_ops(rewritten) == []
    got, want = rewritten.module()(x), model(x)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=0, atol=1e-12), (got - want).abs().max()


def test_dynamic_batch_is_rewritten_dynamic_sizes_are_not() -> None:
    from shimkit.aot.antialias import antialiased_resize_in_math_form

    x = torch.randn(2, 3, 23, 17)
    model = Resize("bilinear", False, size=(10, 7)).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    rewritten, count = antialiased_resize_in_math_form(torch, exported, only_without_shim=False)
    assert count == 1 and aa_ops(rewritten) == []
    x5 = torch.randn(5, 3, 23, 17)
    assert torch.allclose(rewritten.module()(x5), model(x5), atol=1e-5)
    # A dynamic height: the weights' shape would be symbolic, so the op stays (and
    # compile's check names it).
    height = torch.export.Dim("height", min=8, max=64)
    exported = torch.export.export(model, (x,), dynamic_shapes=({2: height},))
    same, count = antialiased_resize_in_math_form(torch, exported, only_without_shim=False)
    assert count == 0 and same is exported


def test_weights_are_made_on_the_input_device() -> None:
    # A CUDA program must build its weights on the GPU. Here the meta device stands in
    # for it: every value of the rewritten program lives there (control: the exported
    # program's do too, and a CPU-made weight would fail the matmul in the rewrite).
    from shimkit.aot.antialias import antialiased_resize_in_math_form

    model = Resize("bicubic", False, size=(10, 7)).eval()
    exported = torch.export.export(model, (torch.empty(2, 3, 23, 17, device="meta"),))
    rewritten, count = antialiased_resize_in_math_form(torch, exported, only_without_shim=False)
    devices = {
        str(node.meta["val"].device)
        for node in rewritten.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }
    assert count == 1 and devices == {"meta"}


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import antialias

    exported = torch.export.export(Resize("bicubic", False, size=(9, 9)).eval(),
                                   (torch.randn(1, 2, 20, 20),))  # fmt: skip
    monkeypatch.setattr(antialias, "torch_has_c_shim", lambda name: True)
    same, count = antialias.antialiased_resize_in_math_form(torch, exported)
    assert count == 0 and same is exported
    monkeypatch.setattr(antialias, "torch_has_c_shim", lambda name: False)
    rewritten, count = antialias.antialiased_resize_in_math_form(torch, exported)
    assert count == 1 and aa_ops(rewritten) == []


class Thumbnail(torch.nn.Module):
    """A preprocessing head: an antialiased downscale feeding a convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Any) -> Any:
        small = F.interpolate(x, size=(16, 12), mode="bicubic", antialias=True)
        return torch.relu(self.conv(small))


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from shimkit.aot import antialias
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_in_math_form_and_run

    torch.manual_seed(6)
    model = Thumbnail().eval()
    inputs = (torch.randn(2, 3, 50, 37),)
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "thumb.pt2")
    assert run.notes == [
        "1 antialiased resize call(s) compiled in their math form (this torch has no C shim "
        "for them; Inductor generates the kernels)"
    ]
    assert any("aoti_torch_" in name for name in run.imports)  # control: imports are read
    assert not any("proxy_executor" in name for name in run.imports)
    (got,), want = run.outputs, model(*inputs).detach().numpy()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5), np.abs(got - want).max()
    # Control: without the rewrite the blob needs libtorch's proxy executor, and compile
    # refuses it, naming the op.
    monkeypatch.setattr(antialias, "torch_has_c_shim", lambda name: True)
    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    assert notes == []
    with pytest.raises(ShimkitError, match="upsample_bicubic2d_aa"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
