"""Top-k and k-th value selection as a stable sort and a slice (shimkit.aot.selection).

The slim CUDA shims select topk and kthvalue on the host, which costs a round trip and
keeps a run from being captured whole in a CUDA graph; a sort along a small static dim is
one Inductor generates on CUDA. Compile rewrites such calls for slim CUDA blobs. Here, on
the CPU (the form is device-neutral; the device runs are in docs/benchmarks.md): values and
indices against torch (largest and smallest, unsorted, other dims, NaN, ties: the lowest
index first), kthvalue with and without keepdim, the mixture-of-experts router of the zoo;
the rewrite leaves no topk (control: as exported there is one), and a wrong form (ascending
for the largest) fails the same comparison (control). Along a dim over Inductor's sort
limit (a vocabulary of 50257), selection in rounds of chunks gives a stable sort's values
and indices (ties, NaN, infinities, integers, a row of NaN only; a round that keeps the
padding's indices fails the comparison: control); with k over the rounds' limit, the first
k of a merge sort of the whole dim. Left alone: a dynamic dim, a 0-dim input, and every call
when `in_math_form` is not asked (the CPU and libtorch targets). A rewritten program
compiles and runs on the slim CPU runtime, where it imports the sort shim instead of
topk's.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
NAN = float("nan")


class TopK(torch.nn.Module):
    def __init__(self, k: int, dim: int, largest: bool, sorted: bool = True) -> None:
        super().__init__()
        self.k, self.dim, self.largest, self.sorted = k, dim, largest, sorted

    def forward(self, x: Any) -> Any:
        return torch.topk(x, self.k, self.dim, self.largest, self.sorted)


class KthValue(torch.nn.Module):
    def __init__(self, k: int, dim: int, keepdim: bool) -> None:
        super().__init__()
        self.k, self.dim, self.keepdim = k, dim, keepdim

    def forward(self, x: Any) -> Any:
        return torch.kthvalue(x, self.k, self.dim, self.keepdim)


def selection_calls(exported: Any) -> list[str]:
    return [
        str(n.target)
        for n in exported.graph.nodes
        if n.op == "call_function" and str(n.target).startswith(("aten.topk", "aten.kthvalue"))
    ]


def rewritten(model: Any, x: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.selection import selection_in_sort_form

    exported = torch.export.export(model, (x,), dynamic_shapes=dynamic_shapes)
    assert selection_calls(exported)  # control: as exported, the call is there
    return selection_in_sort_form(torch, exported)


def rewritten_inputs(model: Any, *inputs: Any) -> tuple[Any, int]:
    from shimkit.aot.selection import selection_in_sort_form

    exported = torch.export.export(model, inputs)
    assert selection_calls(exported)  # control: as exported, the calls are there
    return selection_in_sort_form(torch, exported)


def assert_same(got: Any, want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert torch.equal(g.nan_to_num(-7), w.nan_to_num(-7)), (g, w)
        assert torch.equal(torch.isnan(g), torch.isnan(w)) if g.is_floating_point() else True


def distinct(shape: tuple[int, ...], seed: int) -> Any:
    """Values without ties: indices are then determined, as torch gives them."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(torch.Size(shape).numel(), generator=generator).reshape(shape) * 0.5


@pytest.mark.parametrize(
    "shape,k,dim,largest,sort",
    [
        ((6, 8), 2, -1, True, True),
        ((6, 8), 3, -1, False, True),
        ((5, 9, 4), 4, 1, True, False),
        ((7, 3), 2, 0, True, True),
        ((3, 512), 10, 1, True, True),
    ],
)
def test_topk_matches_torch(
    shape: tuple[int, ...], k: int, dim: int, largest: bool, sort: bool
) -> None:
    model = TopK(k, dim, largest, sort)
    program, count = rewritten(model, distinct(shape, 0))
    assert count == 1 and selection_calls(program) == []
    for seed in range(3):
        x = distinct(shape, seed)
        got, want = program.module()(x), model(x)
        if not sort:  # torch's unsorted order is its own; the sets are the same
            got = tuple(t.sort(dim).values for t in got)
            want = tuple(t.sort(dim).values for t in want)
        assert_same(got, want)


def test_nan_sorts_as_the_largest_and_ties_take_the_lowest_index() -> None:
    x = torch.tensor([[1.0, NAN, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, NAN, NAN, -1.0]])
    program, _ = rewritten(TopK(4, -1, True), x)
    values, indices = program.module()(x)
    assert_same((values,), (torch.topk(x, 4).values,))
    assert indices.tolist() == [[1, 2, 3, 5], [3, 4, 0, 1]]
    smallest, where = rewritten(TopK(2, -1, False), x)[0].module()(x)
    assert smallest.tolist() == [[0.0, 1.0], [-1.0, 2.0]] and where.tolist() == [[4, 0], [5, 0]]


@pytest.mark.parametrize("k,dim,keepdim", [(1, -1, False), (3, 1, True), (2, 0, False)])
def test_kthvalue_matches_torch(k: int, dim: int, keepdim: bool) -> None:
    model = KthValue(k, dim, keepdim)
    program, count = rewritten(model, distinct((4, 7), 1))
    assert count == 1 and selection_calls(program) == []
    for seed in range(3):
        x = distinct((4, 7), seed)
        assert_same(program.module()(x), model(x))


def test_the_zoo_router_matches_eager() -> None:
    from tests.models.zoo import MixtureOfExperts

    torch.manual_seed(3)
    model = MixtureOfExperts().eval()
    x = torch.randn(10, 32)
    program, count = rewritten(model, x)
    assert count == 1 and selection_calls(program) == []
    for _ in range(3):
        y = torch.randn(10, 32)
        with torch.no_grad():
            assert torch.allclose(program.module()(y), model(y), rtol=1e-5, atol=1e-6)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: ascending where the largest are asked for gives other values."""
    from shimkit.aot import selection

    def ascending(torch: Any) -> Any:
        def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
            values, indices = torch.sort(x, dim=dim, stable=True)
            return values.narrow(dim, 0, k), indices.narrow(dim, 0, k)

        return topk

    monkeypatch.setattr(selection, "_topk", ascending)
    model, x = TopK(2, -1, True), distinct((6, 8), 0)
    program, count = rewritten(model, x)
    assert count == 1
    with pytest.raises(AssertionError):
        assert_same(program.module()(x), model(x))


class LongSelections(torch.nn.Module):
    """Top-k over a vocabulary and a k-th value along a long dim, floats and integers."""

    def forward(self, x: Any, i: Any) -> tuple[Any, ...]:
        return (
            *torch.topk(x, 50), *torch.topk(x, 7, largest=False), *torch.kthvalue(x, 100, 1),
            *torch.topk(x.t(), 5, dim=0), *torch.topk(i, 9), *torch.topk(i, 4, largest=False),
        )  # fmt: skip


def long_inputs(seed: int) -> tuple[Any, Any]:
    """Rounded values (many ties) with NaN, a run of +inf and, for seed 2, a row of NaN."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.round(torch.randn(3, 50257, generator=generator) * 20)
    x[0, 7] = x[1, 50000] = NAN
    x[1, 100:200] = float("inf")
    if seed == 2:
        x[2] = NAN
    return x, torch.randint(-1000, 1000, (2, 1300), generator=generator)


def stable_selections(x: Any, i: Any) -> list[Any]:
    """What LongSelections gives by one stable sort of each whole dim."""
    expected = []
    for source, k, dim, descending in (
        (x, 50, -1, True), (x, 7, -1, False), (x, 100, 1, False), (x.t(), 5, 0, True),
        (i, 9, -1, True), (i, 4, -1, False),
    ):  # fmt: skip
        values, indices = torch.sort(source, dim=dim, descending=descending, stable=True)
        expected += [values.narrow(dim, 0, k), indices.narrow(dim, 0, k)]
    expected[4], expected[5] = expected[4][:, 99], expected[5][:, 99]  # the k-th value
    return expected


def test_long_dims_select_in_rounds_as_one_stable_sort() -> None:
    model = LongSelections()
    program, count = rewritten_inputs(model, *long_inputs(0))
    assert count == 6 and selection_calls(program) == []
    for seed in range(3):
        x, i = long_inputs(seed)
        got, want = program.module()(x, i), model(x, i)
        assert_same(got, stable_selections(x, i))
        assert_same(got[::2], want[::2])  # the values are torch's too


def test_a_round_keeping_padding_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: padding that sorts among the real values names indices past the dim."""
    from shimkit.aot import selection

    monkeypatch.setattr(selection, "_sorts_last", lambda torch, dtype, descending: 1e9)
    x, i = long_inputs(0)
    program, _ = rewritten_inputs(LongSelections(), x, i)
    with pytest.raises(AssertionError):
        assert_same(program.module()(x, i), stable_selections(x, i))


def test_past_the_rounds_limit_merge_sorted_left_alone_dynamic_or_0_dim() -> None:
    from shimkit.aot.merge_sort import INDUCTOR_SORT_LIMIT
    from shimkit.aot.selection import CHUNKED_K_LIMIT

    wide = distinct((2, INDUCTOR_SORT_LIMIT + 1), 0)
    for k in (CHUNKED_K_LIMIT, CHUNKED_K_LIMIT + 1, INDUCTOR_SORT_LIMIT + 1):
        program, count = rewritten(TopK(k, -1, True), wide)
        assert count == 1 and selection_calls(program) == []
        assert_same(program.module()(wide), TopK(k, -1, True)(wide))
    # A dynamic selected dim; a dynamic batch beside a static one is rewritten.
    columns = torch.export.Dim("columns", min=2, max=64)
    program, count = rewritten(TopK(2, -1, True), distinct((3, 8), 0), ({1: columns},))
    assert count == 0
    batch = torch.export.Dim("batch", min=1, max=64)
    program, count = rewritten(TopK(2, -1, True), distinct((3, 8), 0), ({0: batch},))
    assert count == 1
    for rows in (1, 5):
        x = distinct((rows, 8), rows)
        assert_same(program.module()(x), TopK(2, -1, True)(x))
    program, count = rewritten(TopK(1, 0, True), torch.tensor(2.5))
    assert count == 0


def test_only_when_asked() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(TopK(2, -1, True), (distinct((6, 8), 0),))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and selection_calls(same) == ["aten.topk.default"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert selection_calls(program) == [] and notes == [
        "1 topk/kthvalue call(s) compiled as a stable sort and a slice (Inductor generates the "
        "sort on CUDA; the slim CUDA shims would select on the host)"
    ]


@pytest.mark.slow
def test_compiled_sort_form_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported, in_math_form

    from tests.models.zoo import MixtureOfExperts

    torch.manual_seed(4)
    model = MixtureOfExperts().eval()
    inputs = (torch.randn(12, 32),)
    exported = torch.export.export(model, inputs)
    program, _ = in_math_form(torch, exported, False, False, slim_cuda=True)
    result = compile_exported(program, tmp_path / "moe.pt2", force=True, show_progress=False)
    imports = {sym.name for blob in result.blobs.values() for sym in blob.imports}
    assert any(name.endswith("aoti_torch_cpu_sort_stable") for name in imports)
    assert not any(name.endswith("aoti_torch_cpu_topk") for name in imports)  # control below
    with shimkit.runtime.load(result.path) as slim, torch.no_grad():
        [got] = slim(*inputs)
        assert torch.allclose(torch.from_numpy(got), model(*inputs), rtol=1e-4, atol=1e-5)
    # Control: as exported, the blob selects with the topk shim.
    plain = compile_exported(exported, tmp_path / "plain.pt2", force=True, show_progress=False)
    plain_imports = {sym.name for blob in plain.blobs.values() for sym in blob.imports}
    assert any(name.endswith("aoti_torch_cpu_topk") for name in plain_imports)


@pytest.mark.slow
def test_compiled_rounds_run_on_the_slim_runtime(tmp_path: Any) -> None:
    from shimkit.aot.selection import selection_in_sort_form

    from tests.aot.math_form_run import compile_and_run

    class Largest(torch.nn.Module):
        def forward(self, x: Any) -> tuple[Any, Any]:
            values, indices = torch.topk(x, 20)
            return values, indices

    model = Largest()
    x = torch.round(torch.randn(2, 2000) * 20)  # ties across chunks
    exported = torch.export.export(model, (x,))
    program, count = selection_in_sort_form(torch, exported)
    assert count == 1
    run = compile_and_run(program, (x,), tmp_path / "long_topk.pt2")
    assert any(name.endswith("aoti_torch_cpu_sort_stable") for name in run.imports)
    assert not any(name.endswith("aoti_torch_cpu_topk") for name in run.imports)
    values, indices = torch.sort(x, descending=True, stable=True)
    assert_same([torch.from_numpy(t) for t in run.outputs], [values[:, :20], indices[:, :20]])
