"""Sorts along a long dim as chunk sorts and merges (shimkit.aot.merge_sort).

The slim CUDA shims sort along a dim longer than Inductor's own sort (512) on the host;
compile rewrites such sorts for slim CUDA blobs into chunk sorts Inductor generates and
pairwise merges. Here, on the CPU (the form is device-neutral; the device runs are in
docs/benchmarks.md): values and indices equal torch's stable sort, ascending and
descending, for float32 with ties, NaN, infinities and signed zeros, float64, float16,
bfloat16, int64, int32, uint8 and bool; lengths just past one chunk (padding), a power of
two (none) and 50257 (a vocabulary); along dim 0; `torch.sort` without `stable`, argsort,
a dynamic batch; the top-p filter of a sampling head; the rewrite leaves no long sort
(control: as exported there is one), and a merge that lets equal keys of the right-hand run
go first fails the comparison on ties (control). Left alone: dims of at most 512 and a
dynamic sorted dim. A rewritten program compiles and runs on the slim CPU runtime.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
NAN, INF = float("nan"), float("inf")


class Sort(torch.nn.Module):
    def __init__(self, dim: int = -1, descending: bool = False, stable: bool = True) -> None:
        super().__init__()
        self.dim, self.descending, self.stable = dim, descending, stable

    def forward(self, x: Any) -> Any:
        if self.stable:
            values, indices = torch.sort(x, dim=self.dim, descending=self.descending, stable=True)
        else:
            values, indices = torch.sort(x, dim=self.dim, descending=self.descending)
        return values, indices  # a plain tuple: AOTInductor cannot package torch's named one


class ArgSort(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.argsort(x, dim=-1, descending=True, stable=True)


class TopP(torch.nn.Module):
    """Nucleus filtering: the smallest set of tokens whose probabilities reach p (sorted
    as such filters do, without `stable`: the form gives the stable order, so the
    reference is the stable sort's)."""

    def __init__(self, stable: bool = False) -> None:
        super().__init__()
        self.stable = stable

    def forward(self, logits: Any) -> Any:
        ordered, tokens = torch.sort(logits, dim=-1, descending=True, stable=self.stable)
        mass = ordered.softmax(-1).cumsum(-1)
        keep = (mass - ordered.softmax(-1)) < 0.9
        return torch.where(keep, ordered, torch.full_like(ordered, -INF)), tokens


def long_sorts(exported: Any) -> list[tuple[int, ...]]:
    """The input shapes of the sorts and argsorts with a static dim longer than 512."""
    shapes = []
    for node in exported.graph.nodes:
        if node.op == "call_function" and str(node.target).startswith(
            ("aten.sort", "aten.argsort")
        ):
            shape = tuple(node.args[0].meta["val"].shape)
            if any(type(size) is int and size > 512 for size in shape):
                shapes.append(shape)
    return shapes


def rewritten(model: Any, x: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.merge_sort import long_sorts_in_merge_form

    exported = torch.export.export(model, (x,), dynamic_shapes=dynamic_shapes)
    assert long_sorts(exported) or dynamic_shapes  # control: as exported, a long sort
    return long_sorts_in_merge_form(torch, exported)


def assert_same(got: Any, want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.is_floating_point():
            assert torch.equal(torch.isnan(g), torch.isnan(w))
            g, w = g.nan_to_num(7.0), w.nan_to_num(7.0)
            # -0.0 and 0.0 are equal values; which one sits where follows the indices.
        assert torch.equal(g, w), (g, w)


def awkward(length: int, dtype: Any = torch.float32, rows: int = 3) -> Any:
    """Few distinct values (many ties), NaN, infinities, signed zeros; one row of NaN."""
    generator = torch.Generator().manual_seed(length)
    x = torch.randint(-20, 20, (rows, length), generator=generator).to(torch.float64) / 4
    x[0, ::7] = NAN
    x[0, 3::11] = INF
    x[0, 5::13] = -INF
    x[1, ::5] = -0.0
    x[1, 1::5] = 0.0
    x[-1] = NAN
    return x.to(dtype)


@pytest.mark.parametrize("length", [513, 2048, 50257])
@pytest.mark.parametrize("descending", [False, True])
def test_float32_values_and_indices_equal_a_stable_sort(length: int, descending: bool) -> None:
    x = awkward(length)
    program, count = rewritten(Sort(descending=descending), x)
    assert count == 1 and long_sorts(program) == []
    assert_same(program.module()(x), torch.sort(x, dim=-1, descending=descending, stable=True))


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]
)
def test_other_dtypes(dtype: Any) -> None:
    x = awkward(1500, torch.float64)
    if not dtype.is_floating_point:
        x = x.nan_to_num(3.0, posinf=9.0, neginf=-9.0) * 4
    x = x.to(dtype)
    for descending in (False, True):
        program, count = rewritten(Sort(descending=descending), x)
        assert count == 1
        assert_same(program.module()(x), torch.sort(x, descending=descending, stable=True))


def test_small_integers_and_bools_dim_0_unstable_sort_and_argsort() -> None:
    generator = torch.Generator().manual_seed(0)
    small = torch.randint(0, 256, (1100, 2), generator=generator, dtype=torch.uint8)
    flags = small % 3 == 0
    for x in (small, flags):
        program, _ = rewritten(Sort(dim=0, descending=True), x)
        assert_same(program.module()(x), torch.sort(x, dim=0, descending=True, stable=True))
    # torch.sort without stable=True leaves ties' order open; the form gives the stable one.
    x = awkward(700)
    program, count = rewritten(Sort(stable=False), x)
    assert count == 1
    assert_same(program.module()(x), torch.sort(x, stable=True))
    program, count = rewritten(ArgSort(), x)
    assert count == 1
    [got] = [program.module()(x)]
    assert torch.equal(got, torch.argsort(x, dim=-1, descending=True, stable=True))


def test_dynamic_batch_and_the_top_p_filter_of_a_sampling_head() -> None:
    batch = torch.export.Dim("batch", min=1, max=32)
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(4, 2000, generator=generator) * 3
    program, count = rewritten(TopP(), logits, ({0: batch},))
    assert count == 1 and long_sorts(program) == []
    for rows in (4, 1, 9):
        # Rounded to 1/64: many ties, whose order only the stable sort fixes.
        x = (torch.randn(rows, 2000, generator=generator) * 192).round() / 64
        assert_same(program.module()(x), TopP(stable=True)(x))


def test_a_merge_that_puts_right_hand_ties_first_fails_the_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control: equal keys of the right-hand run placed before the left-hand run's ones."""
    real = torch.searchsorted

    def ties_first(sorted_sequence: Any, values: Any, right: bool = False) -> Any:
        return real(sorted_sequence, values, right=not right)

    x = awkward(1024)
    monkeypatch.setattr(torch, "searchsorted", ties_first)
    program, _ = rewritten(Sort(), x)  # the form traced with the swapped sides
    monkeypatch.undo()
    with pytest.raises(AssertionError):
        assert_same(program.module()(x), torch.sort(x, stable=True))


def test_left_alone_for_short_or_dynamic_sorted_dims() -> None:
    from shimkit.aot.merge_sort import long_sorts_in_merge_form

    short = torch.export.export(Sort(), (awkward(512),))
    assert long_sorts_in_merge_form(torch, short)[1] == 0
    length = torch.export.Dim("length", min=2, max=5000)
    program, count = rewritten(Sort(), awkward(600), ({1: length},))
    assert count == 0 and any(
        str(n.target).startswith("aten.sort")
        for n in program.graph.nodes
        if n.op == "call_function"
    )


@pytest.mark.slow
def test_compiled_merge_form_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported, in_math_form

    x = awkward(1500)
    model = Sort(descending=True).eval()
    exported = torch.export.export(model, (x,))
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert notes == [
        "1 sort call(s) along a dim longer than 512 compiled as chunk sorts and merges (Inductor "
        "generates the kernels on CUDA; the slim CUDA shims would sort on the host)"
    ]
    result = compile_exported(program, tmp_path / "sort.pt2", force=True, show_progress=False)
    with shimkit.runtime.load(result.path) as slim:
        got = [torch.from_numpy(out) for out in slim(x)]
    assert_same(got, torch.sort(x, descending=True, stable=True))
