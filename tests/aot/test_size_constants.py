"""Values computed from sizes alone become constants of the program (shimkit.aot.constants).

The math forms build their matrices from static sizes; Inductor would compute them at every
run. Here: such a value is evaluated once and handed to the program as a constant (the
results unchanged), while what reads an input, draws random numbers or is too large stays
computed in the program.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


class Program(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        n = x.shape[-1]
        angles = torch.arange(n, dtype=torch.float64).unsqueeze(1) * torch.arange(n) / n
        rotation = torch.cos(angles).to(x.dtype)  # from sizes alone
        noise = torch.rand(n)  # random: a fresh draw every run
        return x @ rotation + (x * 0).sum() * noise, x.sum(0)


def call_targets(exported: Any) -> set[str]:
    return {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}


def test_size_only_values_become_constants() -> None:
    from shimkit.aot.constants import fold_size_only_values

    x = torch.randn(3, 8)
    exported = torch.export.export(Program(), (x,))
    assert "aten.cos.default" in call_targets(exported)  # control: computed as exported
    torch.manual_seed(1)
    want = exported.module()(x)
    assert fold_size_only_values(torch, exported, "folded") == 1
    assert "aten.cos.default" not in call_targets(exported)
    assert "aten.rand.default" in call_targets(exported)  # random: left in the program
    assert set(exported.constants) == {"folded_0"}
    assert exported.constants["folded_0"].shape == (8, 8)
    exported.validate()
    torch.manual_seed(1)
    got = exported.module()(x)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_large_values_stay_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import constants

    exported = torch.export.export(Program(), (torch.randn(3, 8),))
    monkeypatch.setattr(constants, "MAX_FOLDED_BYTES", 8 * 8 * 4 - 1)
    evaluated: list[Any] = []
    evaluate = constants._evaluate
    monkeypatch.setattr(
        constants, "_evaluate", lambda *args: evaluated.append(args[2]) or evaluate(*args)
    )
    assert constants.fold_size_only_values(torch, exported, "folded") == 0
    assert "aten.cos.default" in call_targets(exported) and not exported.constants
    assert not evaluated  # judged by its recorded size: never computed at compile
    # Control: under the cap it is computed, and only what it needs (not the random draw).
    monkeypatch.setattr(constants, "MAX_FOLDED_BYTES", 8 * 8 * 4)
    assert constants.fold_size_only_values(torch, exported, "folded") == 1
    (nodes,) = evaluated
    assert "aten.cos.default" in {str(n.target) for n in nodes}
    assert "aten.rand.default" not in {str(n.target) for n in nodes}


def test_nothing_to_fold_leaves_the_program() -> None:
    from shimkit.aot.constants import fold_size_only_values

    class Plain(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * torch.ones_like(x)  # reads the input

    exported = torch.export.export(Plain(), (torch.randn(2, 3),))
    before = exported.graph_module.code
    assert fold_size_only_values(torch, exported, "folded") == 0
    assert exported.graph_module.code == before
