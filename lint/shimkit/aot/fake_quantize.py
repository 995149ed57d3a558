"""Fake quantization (quantization-aware training's observers) in its math form.

A model exported after quantization-aware training, before it is converted, still rounds
its activations and weights through `torch.fake_quantize_per_tensor_affine` and
`torch.fake_quantize_per_channel_affine`. Neither has a C shim: a blob with them calls
libtorch's proxy executor, which no slim runtime has. Compile writes each call over float32
input in ATen's arithmetic, so Inductor generates the kernel:

    q = round(x * (1 / scale)) + zero_point        (in float32; round half to even, as
                                                    ATen's nearbyint)
    out = (clamp(q, quant_min, quant_max) - zero_point) * scale

with 1 / scale taken in float32 (ATen's `1.0f / scale`), so the results are ATen's bit for
bit (tests/aot/test_fake_quantize_math_form.py, ties included). Other input types keep
the call (and compile names it if the target cannot run it).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from shimkit.aot.decompose import float32_input, rewrite_calls


def _rounded_through(torch: ModuleType, x: Any, inverse: Any, zero_point: Any) -> Any:
    """ATen's quantized value before clamping: zero_point + nearbyint(x * inverse)."""
    return torch.round(x * inverse) + zero_point


def _per_tensor(torch: ModuleType) -> Any:
    def fake_quantize(x: Any, scale: float, zero_point: int, low: int, high: int) -> Any:
        if x.dtype != torch.float32:
            return NotImplemented
        scale32 = np.float32(scale)  # ATen takes the scale as a float
        inverse = float(np.float32(1.0) / scale32)
        q = _rounded_through(torch, x, inverse, float(zero_point))
        return (q.clamp(low, high) - float(zero_point)) * float(scale32)

    return fake_quantize


def _per_tensor_qparams(torch: ModuleType) -> Any:
    def fake_quantize(x: Any, scale: Any, zero_point: Any, low: int, high: int) -> Any:
        if x.dtype != torch.float32:
            return NotImplemented
        scale = scale.to(torch.float32).reshape(())
        zero = zero_point.to(torch.int64).to(torch.float32).reshape(())
        q = _rounded_through(torch, x, 1.0 / scale, zero)
        return (q.clamp(low, high) - zero) * scale

    return fake_quantize


def _per_channel(torch: ModuleType) -> Any:
    def fake_quantize(x: Any, scale: Any, zero_point: Any, axis: int, low: int, high: int) -> Any:
        if x.dtype != torch.float32:
            return NotImplemented
        shape = [1] * x.dim()
        shape[axis % x.dim()] = -1
        scale = scale.to(torch.float32).reshape(shape)
        # An integer zero point is added as ATen adds it (converted to float); a float
        # one (the learnable variant's) as it is.
        zero = zero_point.to(torch.float32).reshape(shape)
        q = _rounded_through(torch, x, 1.0 / scale, zero)
        return (q.clamp(low, high) - zero) * scale

    return fake_quantize


def fake_quantize_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every per-tensor and per-channel fake quantization of float32
    input in its math form, how many calls were rewritten)."""
    ops = torch.ops.aten
    return rewrite_calls(
        exported,
        {
            ops.fake_quantize_per_tensor_affine.default: (_per_tensor(torch), float32_input),
            ops.fake_quantize_per_tensor_affine.tensor_qparams: (
                _per_tensor_qparams(torch),
                float32_input,
            ),
            ops.fake_quantize_per_channel_affine.default: (_per_channel(torch), float32_input),
        },
    )
