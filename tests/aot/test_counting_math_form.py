"""bincount in its math form (shimkit.aot.counting).

No torch has a C shim for `aten.bincount`, whose output length depends on the data, so a
model with `torch.bincount` compiled into a blob that needs libtorch's proxy executor.
Compile now rewrites each call into the length read from the data, zeros and a scatter-add.
Here: the counts and weighted sums against torch (with and without weights of each dtype,
minlength above and below the data's range, an empty input, a dynamic length), ATen's
result dtypes, the rewrite leaves no bincount (control: as exported there is), an op torch
has a shim for is left alone, and a compiled model runs on the slim CPU runtime, its output
as long as each input's data asks (control: without the rewrite, compile refuses it, naming
the op).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


class Counts(torch.nn.Module):
    def __init__(self, minlength: int) -> None:
        super().__init__()
        self.minlength = minlength

    def forward(self, x: Any, w: Any) -> Any:
        return torch.bincount(x, minlength=self.minlength), torch.bincount(x, w, self.minlength)


def bincount_calls(exported: Any) -> list[str]:
    return [str(n.target) for n in exported.graph.nodes if "bincount" in str(n.target)]


def rewritten(model: Any, inputs: tuple[Any, ...], **export: Any) -> Any:
    from shimkit.aot.counting import bincount_in_math_form

    exported = torch.export.export(model, inputs, **export)
    assert bincount_calls(exported)  # control: as exported
    out, count = bincount_in_math_form(torch, exported, only_without_shim=False)
    assert count == len(bincount_calls(exported)) and bincount_calls(out) == []
    return out.module()


@pytest.mark.parametrize("minlength", [0, 3, 40])
@pytest.mark.parametrize("weights", [torch.float32, torch.float64, torch.int64, torch.float16])
def test_math_form_matches_torch(minlength: int, weights: Any) -> None:
    torch.manual_seed(minlength)
    x = torch.randint(0, 12, (50,))
    w = (torch.rand(50) * 10).to(weights)
    model = Counts(minlength)
    got, want = rewritten(model, (x, w))(x, w), model(x, w)
    for g, expected in zip(got, want, strict=True):
        assert g.dtype == expected.dtype and g.shape == expected.shape
        assert torch.allclose(g, expected, rtol=1e-3 if weights == torch.float16 else 1e-6)


def test_other_data_gives_its_own_length() -> None:
    x, w = torch.tensor([1, 2, 2, 5]), torch.ones(4)
    module = rewritten(Counts(0), (x, w))
    for data in ([0, 0, 0, 0], [9, 1, 1, 30], [3, 3, 3, 3]):
        t = torch.tensor(data)
        assert all(torch.equal(g, e) for g, e in zip(module(t, w), Counts(0)(t, w), strict=True))


def test_empty_input_and_dynamic_length() -> None:
    empty = torch.zeros(0, dtype=torch.int64)
    got = rewritten(Counts(4), (empty, torch.zeros(0)))(empty, torch.zeros(0))
    assert [g.tolist() for g in got] == [[0, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]]
    n = torch.export.Dim("n", min=2)
    x, w = torch.tensor([1, 2, 2, 5]), torch.rand(4)
    module = rewritten(Counts(2), (x, w), dynamic_shapes=({0: n}, {0: n}))
    longer, lw = torch.randint(0, 20, (31,)), torch.rand(31)
    for g, e in zip(module(longer, lw), Counts(2)(longer, lw), strict=True):
        assert torch.allclose(g, e)


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import counting

    x, w = torch.tensor([1, 2]), torch.ones(2)
    exported = torch.export.export(Counts(0), (x, w))
    monkeypatch.setattr(counting, "torch_has_c_shim", lambda name: True)
    same, count = counting.bincount_in_math_form(torch, exported)
    assert count == 0 and same is exported
    monkeypatch.setattr(counting, "torch_has_c_shim", lambda name: False)
    assert counting.bincount_in_math_form(torch, exported)[1] == 2


class TokenHistogram(torch.nn.Module):
    """A bag-of-tokens feature: how often each token occurs, weighted by a learned score."""

    def __init__(self) -> None:
        super().__init__()
        self.score = torch.nn.Embedding(64, 1)

    def forward(self, tokens: Any) -> Any:
        weights = torch.sigmoid(self.score(tokens)).squeeze(-1)
        return torch.bincount(tokens, weights, minlength=8) * 2, torch.bincount(tokens)


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    import shimkit.runtime
    from shimkit.aot import counting
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_in_math_form_and_run

    torch.manual_seed(3)
    model = TokenHistogram().eval()
    inputs = (torch.tensor([3, 1, 3, 12, 0, 5]),)
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "hist.pt2")
    assert run.notes == [
        "2 bincount call(s) compiled in their math form (the length read from the data, a "
        "scatter-add; this torch has no C shim for it)"
    ]
    assert any(name.endswith("aoti_torch_item_int64") for name in run.imports)
    assert not any("proxy_executor" in name for name in run.imports)
    # The same blob, other data: each output as long as its data asks.
    with shimkit.runtime.load(tmp_path / "hist.pt2") as slim, torch.no_grad():
        for data in ([3, 1, 3, 12, 0, 5], [0, 0, 1, 1, 2, 2], [63, 2, 2, 2, 2, 40]):
            tokens = torch.tensor(data)
            got, want = slim(tokens.numpy()), model(tokens)
            for g, w in zip(got, want, strict=True):
                assert g.shape == tuple(w.shape)
                assert np.allclose(g, w.numpy(), rtol=1e-5)
    # Control: without the rewrite the blob needs libtorch's proxy executor, and compile
    # refuses it, naming the op.
    monkeypatch.setattr(counting, "torch_has_c_shim", lambda name: True)
    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    assert notes == []
    with pytest.raises(ShimkitError, match=r"bincount"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
