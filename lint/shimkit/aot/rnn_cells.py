"""Recurrent cells in their math form, so Inductor generates the kernels on CUDA.

An exported program keeps `nn.GRUCell` and `nn.LSTMCell` as `aten.gru_cell` and
`aten.lstm_cell`. On the CPU those decompose into matmuls and pointwise ops; on CUDA
they become `_thnn_fused_gru_cell` and `_thnn_fused_lstm_cell`, which have no C shim:
a blob would call them through libtorch's proxy executor, which slim runtimes lack, so
compile refused such models for `--target slim-cuda` (a GRU decoder, found by a held-out
model). `shimkit compile --device cuda` rewrites every call, before Inductor sees the
program, into the cells' definitions (torch's nn.GRUCell and nn.LSTMCell documentation,
and ATen's CPU implementation): two linears, the gates, the new state.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def _gru_cell(torch: ModuleType) -> Any:
    def gru_cell(
        input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None
    ) -> Any:
        gi = torch.nn.functional.linear(input, w_ih, b_ih)
        gh = torch.nn.functional.linear(hx, w_hh, b_hh)
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        reset = torch.sigmoid(i_r + h_r)
        update = torch.sigmoid(i_z + h_z)
        new = torch.tanh(i_n + reset * h_n)
        return new + update * (hx - new)

    return gru_cell


def _lstm_cell(torch: ModuleType) -> Any:
    def lstm_cell(
        input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None
    ) -> Any:
        h, c = hx
        gates = torch.nn.functional.linear(input, w_ih, b_ih) + torch.nn.functional.linear(
            h, w_hh, b_hh
        )
        i, f, g, o = gates.chunk(4, 1)
        cy = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cy), cy

    return lstm_cell


def decompose_rnn_cells(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every gru_cell and lstm_cell in its math form, how many calls were
    rewritten); the program unchanged when it has none."""
    aten = torch.ops.aten
    table = {aten.gru_cell.default: _gru_cell(torch), aten.lstm_cell.default: _lstm_cell(torch)}
    count = sum(
        1 for node in exported.graph.nodes if node.op == "call_function" and node.target in table
    )
    if count == 0:
        return exported, 0
    return exported.run_decompositions(table), count
