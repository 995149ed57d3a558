"""Fake quantization in its math form (shimkit.aot.fake_quantize).

A model exported after quantization-aware training, before conversion, calls
fake_quantize_per_tensor_affine (with number or tensor qparams) and
fake_quantize_per_channel_affine, which have no C shim. Here: the rewritten program gives
ATen's results bit for bit (values on the rounding ties and beyond both clamps, nonzero
zero points, per-channel along dims 0 and 1); no fake-quantize call is left (control: as
exported there are three); float64 input keeps its call; and a compiled QAT-style model runs
on the slim CPU runtime with eager's results bit for bit (control: without the rewrite,
compile refuses it, naming the ops).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")


class Observed(torch.nn.Module):
    """The three fake quantizations a QAT model has, over its input and a weight."""

    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis
        self.register_buffer("scale", torch.tensor([0.1]))
        self.register_buffer("zero", torch.tensor([2], dtype=torch.int32))

    def forward(self, x: Any, w: Any) -> Any:
        a = torch.fake_quantize_per_tensor_affine(x, 0.1, 3, -8, 7)
        b = torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero, 0, 15)
        channels = w.shape[self.axis]
        scale = w.abs().amax([d for d in range(w.dim()) if d != self.axis]) / 7
        zero = torch.arange(channels, dtype=torch.int32) - 1
        c = torch.fake_quantize_per_channel_affine(w, scale, zero, self.axis, -8, 7)
        return a, b, c


FAKE_QUANTIZE_OPS = (
    "aten.fake_quantize_per_tensor_affine.default",
    "aten.fake_quantize_per_tensor_affine.tensor_qparams",
    "aten.fake_quantize_per_channel_affine.default",
)


def fake_quantize_calls(exported: Any) -> list[str]:
    return calls_of(exported, FAKE_QUANTIZE_OPS)


def inputs_on_ties(dtype: Any = torch.float32) -> tuple[Any, Any]:
    # Multiples of half a step (0.05) from -1.2 to 1.2: ties between two steps, and values
    # beyond both ends of [-8, 7] steps.
    x = (torch.arange(-24, 25, dtype=torch.float64) * 0.05).to(dtype).reshape(7, 7)
    w = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    return x, w


@pytest.mark.parametrize("axis", [0, 1])
def test_math_form_gives_atens_results_bit_for_bit(axis: int) -> None:
    from shimkit.aot.fake_quantize import fake_quantize_in_math_form

    model, inputs = Observed(axis).eval(), inputs_on_ties()
    with torch.no_grad():
        exported = torch.export.export(model, inputs)
        assert len(fake_quantize_calls(exported)) == 3  # control: as exported
        rewritten, count = fake_quantize_in_math_form(torch, exported)
        assert count == 3 and fake_quantize_calls(rewritten) == []
        for got, want in zip(rewritten.module()(*inputs), model(*inputs), strict=True):
            assert torch.equal(got, want), (got - want).abs().max()


def test_float64_input_keeps_its_call() -> None:
    from shimkit.aot.fake_quantize import fake_quantize_in_math_form

    class PerTensor(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.fake_quantize_per_tensor_affine(x, 0.1, 3, -8, 7)

    x, _ = inputs_on_ties(torch.float64)
    with torch.no_grad():
        exported = torch.export.export(PerTensor(), (x,))
        same, count = fake_quantize_in_math_form(torch, exported)
    assert count == 0 and same is exported
    assert fake_quantize_calls(same) == ["aten.fake_quantize_per_tensor_affine.default"]


class QatConv(torch.nn.Module):
    """A convolution as quantization-aware training leaves it: activations and the
    per-channel weight fake-quantized."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: Any) -> Any:
        x = torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -128, 127)
        w = self.conv.weight
        scale = w.abs().amax((1, 2, 3)) / 127
        zero = torch.zeros(8, dtype=torch.int32)
        w = torch.fake_quantize_per_channel_affine(w, scale, zero, 0, -127, 127)
        y = torch.relu(torch.nn.functional.conv2d(x, w, self.conv.bias, padding=1))
        y = torch.fake_quantize_per_tensor_affine(y, 0.03, 10, 0, 255)
        return self.fc(y.mean((2, 3)))


@pytest.mark.slow
def test_compiled_qat_model_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import numpy as np
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_and_run

    torch.manual_seed(0)
    model, inputs = QatConv().eval(), (torch.randn(2, 3, 10, 10),)
    with torch.no_grad():
        exported = torch.export.export(model, inputs)
        want = model(*inputs).numpy()
    rewritten, notes = in_math_form(torch, exported, False, False)
    assert notes == [
        "3 fake quantization call(s) (per tensor or channel) compiled in their math form "
        "(ATen's rounding, bit for bit; this torch has no C shim for them)"
    ]
    run = compile_and_run(rewritten, inputs, tmp_path / "qat.pt2", notes)
    assert not any("proxy_executor" in name for name in run.imports)
    np.testing.assert_allclose(run.outputs[0], want, rtol=1e-5, atol=1e-6)
    # Control: as exported, the blob needs libtorch's proxy executor and compile says which
    # ops.
    with pytest.raises(ShimkitError, match="fake_quantize_per_tensor_affine_cachemask"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
