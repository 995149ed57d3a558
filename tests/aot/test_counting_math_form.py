"""bincount, unique and unique_consecutive in their math form (shimkit.aot.counting).

No torch has a C shim for `aten.bincount`, `aten._unique2` or `aten.unique_consecutive`,
whose output lengths depend on the data, so a model with them compiled into a blob that
needs libtorch's proxy executor. Compile now rewrites each call. Here: bincount's counts and
weighted sums against torch (with and without weights of each dtype, minlength above and
below the data's range, an empty input, a dynamic length) in ATen's result dtypes; unique's
and unique_consecutive's values, inverse and counts against torch (ties, NaNs, bools, an
empty input, every combination of outputs asked for), also along a dim (rows sorted
lexicographically; NaNs, bools, other data); the rewrite leaves none of those ops (control:
as exported there are), rows too wide or of dynamic width are left alone, an op torch has a
shim for is left alone, and a compiled model runs on the slim CPU runtime, its outputs
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


COUNTING_OPS = ("bincount", "unique")


def counting_calls(exported: Any) -> list[str]:
    return [
        str(n.target)
        for n in exported.graph.nodes
        if any(op in str(n.target) for op in COUNTING_OPS)
    ]


def rewritten(model: Any, inputs: tuple[Any, ...], **export: Any) -> Any:
    from shimkit.aot.counting import counting_in_math_form

    exported = torch.export.export(model, inputs, **export)
    assert counting_calls(exported)  # control: as exported
    out, count = counting_in_math_form(torch, exported, only_without_shim=False)
    assert count == len(counting_calls(exported)) and counting_calls(out) == []
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


class Distinct(torch.nn.Module):
    def __init__(self, inverse: bool, counts: bool) -> None:
        super().__init__()
        self.inverse, self.counts = inverse, counts

    def forward(self, x: Any) -> Any:
        unique = torch.ops.aten._unique2(x, True, self.inverse, self.counts)
        runs = torch.ops.aten.unique_consecutive(x, self.inverse, self.counts)
        return (*unique, *runs)


def assert_same(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        assert torch.equal(g, w) or torch.allclose(g, w, equal_nan=True), (g, w)


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([[3, 1, 3], [2, 2, 7]]),
        torch.tensor([1.5, float("nan"), 1.5, float("nan"), -0.0, 0.0]),
        torch.tensor([True, False, True, True]),
        torch.tensor([4, 4, 4, 4]),
    ],
)
def test_unique_matches_torch(x: Any, inverse: bool, counts: bool) -> None:
    model = Distinct(inverse, counts)
    assert_same(rewritten(model, (x,))(x), model(x))


def test_unique_of_other_data_and_empty_input() -> None:
    model = Distinct(True, True)
    module = rewritten(model, (torch.tensor([5, 1, 5, 2, 9, 9]),))
    for data in ([0, 0, 0, 0, 0, 0], [6, 5, 4, 3, 2, 1], [1, 2, 1, 2, 1, 2]):
        x = torch.tensor(data)
        assert_same(module(x), model(x))
    empty = torch.zeros(0)
    assert_same(rewritten(model, (empty,))(empty), model(empty))


class DistinctRows(torch.nn.Module):
    def __init__(self, dim: int, inverse: bool, counts: bool) -> None:
        super().__init__()
        self.dim, self.inverse, self.counts = dim, inverse, counts

    def forward(self, x: Any) -> Any:
        unique = torch.unique(
            x, dim=self.dim, return_inverse=self.inverse, return_counts=self.counts
        )
        runs = torch.ops.aten.unique_consecutive(x, self.inverse, self.counts, self.dim)
        return (*(unique if isinstance(unique, tuple) else (unique,)), *runs)


@pytest.mark.parametrize(("inverse", "counts"), [(False, False), (True, True), (True, False)])
@pytest.mark.parametrize(
    ("x", "dim"),
    [
        # Rows that tie on their first element and differ later; a repeated row; a
        # row first seen after its duplicate's later neighbours.
        (torch.tensor([[3, 1, 3], [2, 9, 7], [3, 1, 3], [2, 2, 7], [2, 2, 7], [3, 0, 5]]), 0),
        (torch.tensor([[3, 1, 3], [2, 9, 7], [3, 1, 3], [2, 2, 7]]), 1),  # columns
        (torch.randint(0, 2, (3, 5, 2), generator=torch.Generator().manual_seed(1)), 1),
        (torch.randint(0, 3, (4, 2, 3), generator=torch.Generator().manual_seed(2)), -1),
        (torch.tensor([[0.5, float("nan")], [0.5, float("nan")], [-1.0, 2.0]]), 0),
        (torch.tensor([[True, False], [True, True], [True, False]]), 0),
        (torch.tensor([[7, 7, 7]]), 0),  # one row
    ],
)
def test_unique_along_a_dim_matches_torch(x: Any, dim: int, inverse: bool, counts: bool) -> None:
    model = DistinctRows(dim, inverse, counts)
    assert_same(rewritten(model, (x,))(x), model(x))


def test_unique_along_a_dim_of_other_data() -> None:
    model = DistinctRows(0, True, True)
    module = rewritten(model, (torch.tensor([[1, 2], [1, 2], [0, 4], [9, 9]]),))
    for data in ([[5, 5], [5, 5], [5, 5], [5, 5]], [[4, 3], [3, 4], [4, 3], [0, 0]]):
        x = torch.tensor(data)
        assert_same(module(x), model(x))


def test_unique_along_a_dim_of_no_rows() -> None:
    model = DistinctRows(0, True, True)
    empty = torch.zeros(0, 3, dtype=torch.int64)
    assert_same(rewritten(model, (empty,))(empty), model(empty))


def test_rows_too_wide_or_of_dynamic_width_are_left_alone() -> None:
    from shimkit.aot.counting import MAX_SORTED_ROW_WIDTH, counting_in_math_form

    class Rows(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.unique(x, dim=0), torch.bincount(x.flatten())

    wide = torch.zeros(3, MAX_SORTED_ROW_WIDTH + 1, dtype=torch.int64)
    out, count = counting_in_math_form(
        torch, torch.export.export(Rows(), (wide,)), only_without_shim=False
    )
    assert count == 1 and counting_calls(out) == ["aten.unique_dim.default"]
    width = torch.export.Dim("width", min=2)
    narrow = torch.zeros(3, 4, dtype=torch.int64)
    dynamic = torch.export.export(Rows(), (narrow,), dynamic_shapes=({1: width},))
    out, count = counting_in_math_form(torch, dynamic, only_without_shim=False)
    assert count == 1 and counting_calls(out) == ["aten.unique_dim.default"]
    # Control: as wide as allowed, and a dynamic number of rows, are rewritten.
    rows = torch.export.Dim("rows", min=2)
    for exported in (
        torch.export.export(Rows(), (wide[:, :MAX_SORTED_ROW_WIDTH],)),
        torch.export.export(Rows(), (narrow,), dynamic_shapes=({0: rows},)),
    ):
        out, count = counting_in_math_form(torch, exported, only_without_shim=False)
        assert count == 2 and counting_calls(out) == []


def test_left_alone_where_torch_has_the_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import counting

    x, w = torch.tensor([1, 2]), torch.ones(2)
    exported = torch.export.export(Counts(0), (x, w))
    monkeypatch.setattr(counting, "torch_has_c_shim", lambda name: True)
    same, count = counting.counting_in_math_form(torch, exported)
    assert count == 0 and same is exported
    monkeypatch.setattr(counting, "torch_has_c_shim", lambda name: False)
    assert counting.counting_in_math_form(torch, exported)[1] == 2


class TokenHistogram(torch.nn.Module):
    """A bag-of-tokens feature: how often each token occurs, weighted by a learned score, and
    the distinct tokens with their counts."""

    def __init__(self) -> None:
        super().__init__()
        self.score = torch.nn.Embedding(64, 1)

    def forward(self, tokens: Any) -> Any:
        weights = torch.sigmoid(self.score(tokens)).squeeze(-1)
        vocabulary, counts = torch.unique(tokens, return_counts=True)
        return torch.bincount(tokens, weights, minlength=8) * 2, vocabulary, counts


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
        "2 bincount/unique call(s) compiled in their math form (sizes read from the data; "
        "this torch has no C shim for them)"
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
    with pytest.raises(ShimkitError, match=r"bincount.*_unique2|_unique2.*bincount"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)
