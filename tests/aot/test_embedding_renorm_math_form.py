"""Norm-limited embedding lookups in their math form (shimkit.aot.embedding).

`nn.Embedding(max_norm=...)` renormalises the rows it looks up in place
(`aten.embedding_renorm_`), for which no torch has a C shim: its blob needed libtorch's
proxy executor. Compile now rewrites the renorm and its lookup into the lookup and a scaling
of each looked-up row. Here: the outputs equal eager PyTorch's first call (p = 1, 2, 3 and
inf, repeated ids, padding_idx, a dynamic batch, rows under and over the limit); a weight
read elsewhere (tied to an output projection) is left alone, where eager's write-back would
matter; an op torch has a shim for is left alone; and a compiled model runs on the slim CPU
runtime (control: without the rewrite, compile refuses it, naming the op), also beside a
form that decomposes the program first.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")


class Lookup(torch.nn.Module):
    def __init__(self, norm_type: float, padding_idx: int | None = None) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(
            30, 6, padding_idx=padding_idx, max_norm=1.5, norm_type=norm_type
        )
        self.head = torch.nn.Linear(6, 4)

    def forward(self, ids: Any) -> Any:
        return self.head(self.table(ids)).tanh()


class Tied(torch.nn.Module):
    """A language-model head tied to its embedding: the weight is read twice."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(30, 6, max_norm=1.0)

    def forward(self, ids: Any) -> Any:
        return self.table(ids) @ self.table.weight.T


IDS = torch.tensor([[1, 2, 3, 2], [4, 4, 0, 29]])


def renorm_calls(exported: Any) -> list[str]:
    return [str(n.target) for n in exported.graph.nodes if "renorm" in str(n.target)]


def rewritten(model: Any, ids: Any, **export: Any) -> tuple[Any, int]:
    from shimkit.aot.embedding import embedding_renorm_in_math_form

    exported = torch.export.export(copy.deepcopy(model), (ids,), **export)
    assert renorm_calls(exported)  # control: as exported
    return embedding_renorm_in_math_form(torch, exported, only_without_shim=False)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_math_form_matches_eager(norm_type: float) -> None:
    torch.manual_seed(4)
    model = Lookup(norm_type).eval()
    with torch.no_grad():
        model.table.weight[::2] *= 0.05  # the even rows under the limit, the odd ones over
    out, count = rewritten(model, IDS)
    assert count == 1 and renorm_calls(out) == []
    norms = torch.linalg.vector_norm(model.table.weight[IDS.flatten()], norm_type, dim=-1)
    assert (norms > 1.5).any() and (norms < 1.5).any()  # both kinds of row are looked up
    with torch.no_grad():
        want = copy.deepcopy(model)(IDS)  # eager's first call, on weights not yet written
    assert torch.allclose(out.module()(IDS), want, atol=1e-6)


def test_padding_idx_and_dynamic_batch() -> None:
    torch.manual_seed(5)
    model = Lookup(2.0, padding_idx=0).eval()
    batch = torch.export.Dim("batch", min=1)
    out, count = rewritten(model, IDS, dynamic_shapes=({0: batch},))
    assert count == 1
    for ids in (IDS, torch.randint(0, 30, (7, 4))):
        with torch.no_grad():
            want = copy.deepcopy(model)(ids)
        assert torch.allclose(out.module()(ids), want, atol=1e-6)


def test_a_weight_read_elsewhere_is_left_alone() -> None:
    out, count = rewritten(Tied().eval(), IDS)
    assert count == 0 and renorm_calls(out)


def test_rewritten_beside_forms_that_decompose_the_program() -> None:
    """The other math forms run torch's decompositions, which turn the in-place renorm into a
    functional op and a write to the weight: compile rewrites the lookup first. (Found by a
    consumer's model with a bincount beside its embedding.)"""
    from shimkit.aot.compile import in_math_form

    class Counted(Lookup):
        def forward(self, ids: Any) -> Any:
            return super().forward(ids), torch.bincount(ids.flatten())

    model = Counted(2.0).eval()
    out, notes = in_math_form(
        torch, torch.export.export(copy.deepcopy(model), (IDS,)), False, False
    )
    assert renorm_calls(out) == [] and len(notes) == 2
    assert notes[0].startswith("1 norm-limited embedding lookup(s)")
    with torch.no_grad():
        want = copy.deepcopy(model)(IDS)
    assert all(
        torch.allclose(g, w, atol=1e-6) for g, w in zip(out.module()(IDS), want, strict=True)
    )


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import embedding

    exported = torch.export.export(Lookup(2.0).eval(), (IDS,))
    monkeypatch.setattr(embedding, "torch_has_c_shim", lambda name: True)
    same, count = embedding.embedding_renorm_in_math_form(torch, exported)
    assert count == 0 and same is exported


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from shimkit.aot import embedding
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_in_math_form_and_run

    torch.manual_seed(6)
    model = Lookup(2.0).eval()
    with torch.no_grad():
        want = copy.deepcopy(model)(IDS)
    run = compile_in_math_form_and_run(torch, copy.deepcopy(model), (IDS,), tmp_path / "e.pt2")
    assert run.notes == [
        "1 norm-limited embedding lookup(s) (max_norm) compiled in their math form (each "
        "looked-up row scaled; the weight is not written back; this torch has no C shim for "
        "embedding_renorm)"
    ]
    assert not any("proxy_executor" in name for name in run.imports)
    assert np.allclose(run.outputs[0], want.numpy(), atol=1e-6)
    # Control: without the rewrite the blob needs libtorch's proxy executor, and compile
    # refuses it, naming the op.
    monkeypatch.setattr(embedding, "torch_has_c_shim", lambda name: True)
    exported, notes = in_math_form(torch, torch.export.export(model, (IDS,)), False, False)
    assert notes == []
    with pytest.raises(ShimkitError, match=r"embedding_renorm"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
