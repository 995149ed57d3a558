"""`export_program_on`: a model that torch.export cannot export on its GPU is exported on
the CPU and the program moved to the GPU, with a note saying so.

torch 2.11 cannot prove the stride guards of a grouped-query attention with a dynamic
sequence length on CUDA (run 42, docs/benchmarks.md); the same model exports on the CPU, and
the moved program matches eager on the GPU. CI has no GPU, so here the device is `meta`
(torch moves programs there as it moves them to CUDA) and the device's export failure is the
model's own: it refuses its first trace.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from shimkit.errors import ShimkitError

torch = pytest.importorskip("torch")


class FailsFirstTraces(torch.nn.Module):
    """A linear layer whose first `failures` traces raise, as a device's export might."""

    # Outside the module: torch.export puts back the attributes a trace changes.
    traces: ClassVar[list[str]] = []

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.failures = failures
        FailsFirstTraces.traces.clear()

    def forward(self, x: Any) -> Any:
        FailsFirstTraces.traces.append(x.device.type)
        if len(FailsFirstTraces.traces) <= self.failures:
            raise RuntimeError(f"trace {len(FailsFirstTraces.traces)} refused")
        return self.linear(x).relu()


def export_on(model: FailsFirstTraces, device: str) -> tuple[Any, list[str]]:
    from shimkit.aot.compile import export_program_on

    batch = torch.export.Dim("batch", min=2, max=16)
    return export_program_on(torch, model, (torch.randn(3, 4),), "m.py", device, ({0: batch},))


def test_a_failed_device_export_is_exported_on_the_cpu_and_moved_with_a_note() -> None:
    model = FailsFirstTraces(failures=1)
    exported, notes = export_on(model, "meta")
    assert FailsFirstTraces.traces == ["cpu", "cpu"]
    assert notes == [
        "torch.export failed on meta (RuntimeError: trace 1 refused); the program exported on "
        "the CPU was moved to meta (torch.export.passes.move_to_device_pass; it may keep views "
        "laid out for the CPU's kernels: if compiling it fails, fix the meta export)"
    ]
    assert {t.device.type for t in exported.state_dict.values()} == {"meta"}
    # The model is back on its device; the program keeps its dynamic batch.
    assert {p.device.type for p in model.parameters()} == {"meta"}
    [x] = [n for n in exported.graph.nodes if n.op == "placeholder" and n.name == "x"]
    assert str(x.meta["val"].shape[0]) != "3"


def test_when_both_exports_fail_the_error_is_the_devices() -> None:
    model = FailsFirstTraces(failures=2)
    with pytest.raises(ShimkitError) as caught:
        export_on(model, "meta")
    assert str(caught.value) == ("m.py: torch.export failed on meta: RuntimeError: trace 1 refused")
    assert {p.device.type for p in model.parameters()} == {"meta"}


def test_control_a_cpu_export_has_no_fallback_and_no_note() -> None:
    model = FailsFirstTraces(failures=1)
    with pytest.raises(ShimkitError, match=r"^m\.py: torch\.export failed: RuntimeError: trace 1"):
        export_on(model, "cpu")
    assert FailsFirstTraces.traces == ["cpu"]
    exported, notes = export_on(model, "cpu")
    assert notes == [] and {t.device.type for t in exported.state_dict.values()} == {"cpu"}


class PerChannelFakeQuant(torch.nn.Module):
    """A quantization-aware convolution as trained: its per-channel scale comes from the
    weight, and fake_quantize has no derivative for the scale."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: Any) -> Any:
        w = self.conv.weight
        scale = w.abs().amax((1, 2, 3)) / 127
        zero = torch.zeros(4, dtype=torch.int32)
        w = torch.fake_quantize_per_channel_affine(w, scale, zero, 0, -127, 127)
        return torch.nn.functional.conv2d(x, w, self.conv.bias)


def test_the_export_is_traced_without_autograd() -> None:
    from shimkit.aot.compile import export_program_on

    model, inputs = PerChannelFakeQuant(), (torch.randn(1, 3, 6, 6),)
    exported, notes = export_program_on(torch, model, inputs, "qat.py", "cpu")
    assert notes == []
    with torch.no_grad():  # inference, as the compiled program runs
        torch.testing.assert_close(exported.module()(*inputs), model(*inputs))
    # Control: traced with autograd on, as torch.export does by default, the model fails.
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'scale'"):
        torch.export.export(model, inputs)
