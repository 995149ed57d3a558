"""`shimkit compile` reports an output Inductor compiles in another shape than the exported
program's (shimkit.aot.outputs), by index with both shapes.

torch 2.11's CUDA lowering of an LSTM hands its final cell state back as [2, 1, 3, 32] for
[2, 3, 32] (docs/benchmarks.md); the CPU has no such case, so the slow test gives Inductor
one: a custom op whose lowering transposes (a lowering bug of the same kind: the IR node's
shape is not the FX node's). The package really returns the transposed shape, the warning
names that output and no other; the model's correctly lowered output is the control.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from shimkit.aot.outputs import ShapeDisagreement, _differ

MODEL = """
import torch
from torch._inductor import lowering as L

aten = torch.ops.aten


@torch.library.custom_op("shimkit_test::transposed", mutates_args=())
def transposed(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@transposed.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("shimkit_test::kept", mutates_args=())
def kept(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@kept.register_fake
def _(x):
    return torch.empty_like(x)


# Inductor's lowerings: `kept` keeps the shape (the control), `transposed` does not (the
# bug under test: [2, 3] is promised, [3, 2] compiled).
L.register_lowering(torch.ops.shimkit_test.kept.default)(
    lambda x: L.lowerings[aten.clone.default](x)
)
L.register_lowering(torch.ops.shimkit_test.transposed.default)(
    lambda x: L.lowerings[aten.clone.default](L.lowerings[aten.permute.default](x, [1, 0]))
)


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        return torch.ops.shimkit_test.kept(x + 1), torch.ops.shimkit_test.transposed(x * 2)


model = TwoOutputs()
example_inputs = (torch.randn(2, 3),)
"""


def test_only_rank_or_static_sizes_count() -> None:
    sympy = pytest.importorskip("sympy")
    s0 = sympy.Symbol("s0")
    assert _differ([2, 1, 3, 32], [2, 3, 32])  # rank
    assert _differ([3, 2], [2, 3]) and _differ([sympy.Integer(3), 2], [2, 3])
    assert not _differ([sympy.Integer(2), 3], [2, 3])
    # Symbolic sizes Inductor may spell differently are not a disagreement; rank still is.
    assert not _differ([s0, 3], [2 * s0 - s0, 3]) and not _differ([s0, 3], [7, 3])
    assert _differ([s0, 3], [s0, 3, 1])


def test_the_line_names_the_output_and_both_shapes() -> None:
    line = ShapeDisagreement(1, "getitem_2", ("2", "1", "3", "32"), ("2", "3", "32")).line("m.py")
    assert line.startswith("m.py: output 1 (getitem_2) is compiled as [2, 1, 3, 32] where the ")
    assert "exported program gives [2, 3, 32]" in line and "\n" not in line


@pytest.mark.slow
def test_compile_warns_for_an_output_inductor_lowered_in_another_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from shimkit.cli import main

    source = tmp_path / "two_outputs.py"
    source.write_text(MODEL)
    out = tmp_path / "two_outputs.pt2"
    assert main(["compile", str(source), "-o", str(out), "--target", "libtorch"]) == 0
    captured = capsys.readouterr()
    warnings = [ln for ln in captured.err.splitlines() if ln.startswith("shimkit: warning: ")]
    assert len(warnings) == 1, captured.err  # output 0, lowered right, is not named
    assert "output 1 (" in warnings[0] and "compiled as [3, 2]" in warnings[0]
    assert "exported program gives [2, 3]" in warnings[0]
    # The warning is about the package: torch's own loader returns the compiled shape too
    # (run_packages.py, its own process, compares with eager).
    from shimkit.aot.forward import build_forwarding_library
    from shimkit.config import load_config
    from shimkit.header import find_torch, shim_names

    forwarder = build_forwarding_library(shim_names(find_torch().include_dir), load_config())
    run = Path(__file__).with_name("run_packages.py")
    proc = subprocess.run([sys.executable, str(run), str(forwarder), f"{out}={source}"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [result] = json.loads(proc.stdout.strip().splitlines()[-1]).values()
    assert not result["ok"] and "torch.Size([3, 2]) != torch.Size([2, 3])" in result["detail"]
