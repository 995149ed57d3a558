"""GRU and LSTM cells compiled in their math form (shimkit.aot.rnn_cells).

On CUDA an exported `aten.gru_cell` / `aten.lstm_cell` becomes torch's fused CUDA cell,
which has no C shim (libtorch's proxy executor), so `shimkit compile --device cuda` for the
slim target rewrites every cell into linears and gates first. Here, on the CPU: the rewrite
matches eager (batched and with and without biases, a decoder loop of cells), leaves no cell
op in the program (control: as exported the program holds them), and leaves programs
without cells alone.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn


class Cells(nn.Module):
    """A GRU cell and an LSTM cell, then three decoder steps feeding each its own output."""

    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.gru = nn.GRUCell(6, 5, bias=bias)
        self.lstm = nn.LSTMCell(6, 5, bias=bias)
        self.back = nn.Linear(5, 6)

    def forward(self, x: Any, h: Any, c: Any) -> tuple[Any, ...]:
        outputs = []
        g, (lh, lc) = h, (h, c)
        for _ in range(3):
            g = self.gru(x, g)
            lh, lc = self.lstm(x, (lh, lc))
            x = torch.tanh(self.back(g + lh))
            outputs += [g, lh, lc]
        return tuple(outputs)


def cell_targets(exported: Any) -> list[str]:
    return [
        str(node.target)
        for node in exported.graph.nodes
        if node.op == "call_function" and "_cell" in str(node.target)
    ]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_math_form_matches_eager_and_holds_no_cell_op(bias: bool) -> None:
    from shimkit.aot.rnn_cells import decompose_rnn_cells

    torch.manual_seed(4)
    model = Cells(bias).eval()
    inputs = (torch.randn(3, 6), torch.randn(3, 5), torch.randn(3, 5))
    exported = torch.export.export(model, inputs)
    # Control: as exported, the program holds the ops CUDA turns into fused fallbacks.
    assert sorted(set(cell_targets(exported))) == [
        "aten.gru_cell.default",
        "aten.lstm_cell.default",
    ]
    rewritten, count = decompose_rnn_cells(torch, exported)
    assert count == 6 and cell_targets(rewritten) == []
    with torch.no_grad():
        for got, want in zip(rewritten.module()(*inputs), model(*inputs), strict=True):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_program_without_cells_is_left_alone() -> None:
    from shimkit.aot.rnn_cells import decompose_rnn_cells

    exported = torch.export.export(nn.Linear(4, 4), (torch.randn(2, 4),))
    assert decompose_rnn_cells(torch, exported) == (exported, 0)


def test_in_math_form_says_what_it_rewrote() -> None:
    from shimkit.aot.compile import in_math_form

    inputs = (torch.randn(3, 6), torch.randn(3, 5), torch.randn(3, 5))
    exported = torch.export.export(Cells(True).eval(), inputs)
    _, notes = in_math_form(torch, exported, attention=True, rnn_cells=True)
    assert notes == [
        "6 GRU/LSTM cell call(s) compiled in their math form (Inductor generates the kernels; "
        "torch's fused CUDA cells have no C shim)"
    ]
    assert in_math_form(torch, exported, attention=True, rnn_cells=False)[1] == []
