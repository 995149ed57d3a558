"""Compiles freeze the weights, but Inductor cannot freeze a program that calls nonzero
(`shimkit.aot.inductor_options.UNFREEZABLE_OPS`): compile builds it without freezing and says so in
a note. Controls: the upstream failure is real (Inductor with freezing fails on this
program), and a program without nonzero compiles frozen with no note."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shimkit.runtime as rt
from shimkit.aot.compile import compile_model
from shimkit.aot.inductor_options import CPU_INFERENCE_OPTIONS

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")


class Anchors(torch.nn.Module):
    def __init__(self, nonzero: bool) -> None:
        super().__init__()
        self.nonzero = nonzero
        self.score = torch.nn.Conv2d(3, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = torch.sigmoid(self.score(x)).flatten()
        return torch.nonzero(scores > 0.5) if self.nonzero else scores * 2


def test_a_program_with_nonzero_compiles_unfrozen_with_a_note(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Anchors(nonzero=True).eval()
    result = compile_model(
        model, (torch.randn(1, 3, 4, 4),), tmp_path / "a.pt2", show_progress=False
    )
    [note] = result.notes
    assert "compiled without freezing" in note and "aten.nonzero.default" in note
    x = torch.randn(1, 3, 4, 4)
    with rt.load(result.path) as slim, torch.no_grad():
        np.testing.assert_array_equal(slim(x.numpy())[0], model(x).numpy())


def test_control_inductor_cannot_freeze_it(tmp_path: Path) -> None:
    exported = torch.export.export(Anchors(nonzero=True).eval(), (torch.randn(1, 3, 4, 4),))
    with torch.no_grad(), pytest.raises(Exception, match="materialize_symints: no producer"):
        torch._inductor.aoti_compile_and_package(
            exported,
            package_path=str(tmp_path / "t.pt2"),
            inductor_configs=dict(CPU_INFERENCE_OPTIONS),
        )


def test_control_without_nonzero_no_note(tmp_path: Path) -> None:
    model = Anchors(nonzero=False).eval()
    result = compile_model(
        model, (torch.randn(1, 3, 4, 4),), tmp_path / "b.pt2", show_progress=False
    )
    assert result.notes == []
