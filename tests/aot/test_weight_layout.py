"""CPU compiles store the weights only linear layers read column-major
(`shimkit.aot.weight_layout`), so the blob hands the GEMM a plain [in, out] operand. Controls:
a weight something else reads too keeps its layout, the model's own parameters are not
touched, and without the pass the compiled constant is the transposed view it was."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import shimkit.runtime as rt
from shimkit.aot import compile as aot_compile
from shimkit.aot.pt2 import read_wrapper_sources
from shimkit.aot.weight_layout import linear_weights_column_major

torch = pytest.importorskip("torch")


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)
    ).eval()


class TiedHead(torch.nn.Module):
    """A token embedding whose table is also the output layer's weight (GPT-style)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 16)
        self.mix = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.mix(self.embed(tokens))))


class AlsoSummed(torch.nn.Module):
    """A linear weight that the program also reads as a tensor of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.lin.weight.sum()


class SharedPair(torch.nn.Module):
    """Two linear layers with one weight, under two names."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 16)
        self.second = torch.nn.Linear(16, 16)
        self.second.weight = self.first.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def column_major(t: torch.Tensor) -> bool:
    return t.stride() == (1, t.shape[0])


def test_mlp_weights_become_column_major_with_the_same_values() -> None:
    model = mlp()
    exported = torch.export.export(model, (torch.randn(4, 16),))
    exported, count = linear_weights_column_major(torch, exported)
    assert count == 2
    state = exported.state_dict
    for index in (0, 2):
        weight = state[f"{index}.weight"]
        assert column_major(weight) and isinstance(weight, torch.nn.Parameter)
        assert torch.equal(weight, model[index].weight)
        # Control: the model's own parameter keeps its row-major layout.
        assert model[index].weight.is_contiguous()
    assert state["0.bias"] is model[0].bias
    x = torch.randn(4, 16)
    torch.testing.assert_close(exported.module()(x), model(x))
    # Applied again, nothing is left to change.
    assert linear_weights_column_major(torch, exported)[1] == 0


def test_the_decomposed_form_is_recognised() -> None:
    exported = torch.export.export(mlp(), (torch.randn(4, 16),)).run_decompositions()
    targets = {str(n.target) for n in exported.graph.nodes}
    assert "aten.addmm.default" in targets and "aten.linear.default" not in targets
    exported, count = linear_weights_column_major(torch, exported)
    assert count == 2


def test_a_weight_read_by_anything_else_keeps_its_layout() -> None:
    tied = torch.export.export(TiedHead().eval(), (torch.tensor([[1, 2, 3]]),))
    tied, count = linear_weights_column_major(torch, tied)
    # Only the mixing layer's weight: the tied table is an embedding's too.
    assert count == 1
    assert column_major(tied.state_dict["mix.weight"])
    assert tied.state_dict["embed.weight"].is_contiguous()

    summed = torch.export.export(AlsoSummed().eval(), (torch.randn(2, 16),))
    summed, count = linear_weights_column_major(torch, summed)
    assert count == 0 and summed.state_dict["lin.weight"].is_contiguous()

    # One tensor under two names: relaid under one, the blob would hold it twice.
    shared = torch.export.export(SharedPair().eval(), (torch.randn(2, 16),))
    assert len(shared.state_dict) == 4
    shared, count = linear_weights_column_major(torch, shared)
    assert count == 0 and shared.state_dict["first.weight"].is_contiguous()


def frozen_strides(package: Path) -> set[str]:
    """The strides of the blob's constants of two dimensions, as the wrapper records them."""
    [source] = read_wrapper_sources(package).values()
    return set(re.findall(r"constants_info_\[\d+\]\.stride = \{(\d+, \d+)\};", source))


@pytest.mark.slow
def test_the_compiled_blob_hands_the_gemm_plain_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = mlp()
    x = torch.randn(4, 16)
    relaid = aot_compile.compile_model(model, (x,), tmp_path / "mlp.pt2", show_progress=False)
    # The weights' transposes, [16, 32] and [32, 8], as contiguous matrices.
    assert frozen_strides(relaid.path) == {"32, 1", "8, 1"}
    with rt.load(relaid.path) as slim, torch.no_grad():
        np.testing.assert_allclose(slim(x.numpy())[0], model(x).numpy(), rtol=1e-5, atol=1e-6)
    # Control: without the pass the blob's constants are transposed views.
    monkeypatch.setattr(aot_compile, "linear_weights_column_major", lambda _t, ep: (ep, 0))
    plain = aot_compile.compile_model(model, (x,), tmp_path / "plain.pt2", show_progress=False)
    assert frozen_strides(plain.path) == {"1, 16", "1, 32"}
