"""Embedding bags as a lookup and a segment sum or maximum (shimkit.aot.embedding_bag).

The slim CUDA shims pool `_embedding_bag` on the host; compile rewrites sum, mean and max
bags for slim CUDA blobs into ops Inductor generates on the GPU. Here, on the CPU (the form
is device-neutral; the device runs are in docs/benchmarks.md): the pooled output against
ATen for sum, mean and max, offsets with empty bags in the middle and at the end,
include_last_offset, per-sample weights, padding_idx (not counted in a mean, not a max's
candidate; a bag of padding only), fixed-length 2-D bags (`nn.EmbeddingBag`'s 2-D input,
max bags of any size, a dynamic batch), float64 and int32 indices, a dynamic number of
indices, the zoo's recommender; the rewrite leaves no bag (control: as exported there is
one), and a mean that does not divide fails the same comparison (control). Half-precision
weights: summed in float32, rounded once. Left alone: max bags given by offsets beyond the
dense limit or with a dynamic number of indices, a program that reads the op's other
outputs. A rewritten program compiles and runs on the slim CPU runtime without the
`_embedding_bag` shim (control: as exported, its blob imports it).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


class Bag(torch.nn.Module):
    def __init__(self, mode: str = "sum", dtype: Any = torch.float32, **options: Any) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.weight = torch.nn.Parameter(torch.randn(12, 6, dtype=dtype))
        self.mode, self.options = mode, options

    def forward(self, indices: Any, offsets: Any = None, weights: Any = None) -> Any:
        return F.embedding_bag(
            indices, self.weight, offsets, mode=self.mode, per_sample_weights=weights,
            **self.options,
        )  # fmt: skip


def bag_calls(program: Any) -> list[str]:
    return [
        str(n.target)
        for n in program.graph.nodes
        if n.op == "call_function" and "embedding_bag" in str(n.target)
    ]


def rewritten(model: Any, inputs: tuple[Any, ...], dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.embedding_bag import embedding_bag_in_math_form

    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert bag_calls(exported)  # control: as exported, the bag is there
    return embedding_bag_in_math_form(torch, exported)


def assert_close(got: Any, want: Any) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-6), (got, want)


INDICES = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
OFFSETS = torch.tensor([0, 2, 2, 7, 10])  # bag 1 empty, and the last one (10 = len) too


@pytest.mark.parametrize(
    "mode,options,offsets",
    [
        ("sum", {}, OFFSETS),
        ("mean", {}, OFFSETS),
        ("mean", {"include_last_offset": True}, OFFSETS),
        ("sum", {"padding_idx": 1}, OFFSETS),
        ("mean", {"padding_idx": 5}, torch.tensor([0, 4, 6])),
        ("max", {}, OFFSETS),
        ("max", {"include_last_offset": True}, OFFSETS),
        # Bag 1 holds padding only (index 1 twice): zero, as an empty bag.
        ("max", {"padding_idx": 1}, torch.tensor([0, 1, 3, 3, 8])),
    ],
)
def test_pooled_output_matches_aten(mode: str, options: dict[str, Any], offsets: Any) -> None:
    model = Bag(mode, **options)
    program, count = rewritten(model, (INDICES, offsets))
    assert count == 1 and bag_calls(program) == []
    with torch.no_grad():
        assert_close(program.module()(INDICES, offsets), model(INDICES, offsets))
        other = torch.tensor([0, 11, 1, 7, 5, 5, 8, 2, 10, 4])  # same sizes, other rows
        assert_close(program.module()(other, offsets), model(other, offsets))


def test_per_sample_weights_2d_bags_float64_and_int32_indices() -> None:
    weights = torch.rand(len(INDICES))
    model = Bag("sum")
    program, _ = rewritten(model, (INDICES, OFFSETS, weights))
    with torch.no_grad():
        assert_close(program.module()(INDICES, OFFSETS, weights), model(INDICES, OFFSETS, weights))
    fixed = INDICES.reshape(5, 2)  # five bags of two, no offsets
    for mode in ("sum", "mean", "max"):
        model = Bag(mode, dtype=torch.float64)
        program, count = rewritten(model, (fixed,))
        assert count == 1
        with torch.no_grad():
            assert_close(program.module()(fixed), model(fixed))
    small = (INDICES.to(torch.int32), OFFSETS.to(torch.int32))
    model = Bag("mean")
    program, count = rewritten(model, small)
    assert count == 1
    with torch.no_grad():
        assert_close(program.module()(*small), model(*small))


def test_fixed_length_max_bags_of_a_dynamic_batch_beyond_the_dense_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nn.EmbeddingBag's 2-D input exports as flattened indices and arange offsets; the form
    reduces each row's lookups, so the dense comparison's limit does not apply."""
    from shimkit.aot import embedding_bag

    monkeypatch.setattr(embedding_bag, "DENSE_LIMIT", 1)
    for options in ({}, {"padding_idx": 4}):
        model = Bag("max", **options)
        batch = torch.export.Dim("batch", min=2, max=64)
        rows = torch.tensor([[3, 4, 4], [4, 4, 4], [0, 11, 7], [5, 4, 2]])  # row 1: padding only
        program, count = rewritten(model, (rows,), ({0: batch},))
        assert count == 1 and bag_calls(program) == []
        with torch.no_grad():
            for batch_rows in (rows, torch.randint(0, 12, (37, 3))):
                assert_close(program.module()(batch_rows), model(batch_rows))


def test_dynamic_number_of_indices() -> None:
    model = Bag("mean")
    n = torch.export.Dim("n", min=2, max=100)
    program, count = rewritten(model, (INDICES, OFFSETS), ({0: n}, None))
    assert count == 1
    for length in (10, 13, 40):
        indices = torch.arange(length) % 12
        offsets = torch.tensor([0, 2, 2, 7, length])
        with torch.no_grad():
            assert_close(program.module()(indices, offsets), model(indices, offsets))


def test_the_zoo_recommender_matches_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["recommender"]()
    program, count = rewritten(zoo.model, zoo.inputs)
    assert count == 1 and bag_calls(program) == []
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), zoo.model(*zoo.inputs), strict=True):
            assert got.dtype == want.dtype
            assert torch.allclose(got.double(), want.double(), rtol=1e-5, atol=1e-6)


def test_a_mean_that_does_not_divide_fails_the_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control: the comparison sees a wrong form (the mean's bags summed)."""
    from shimkit.aot import embedding_bag

    monkeypatch.setattr(embedding_bag, "MEAN", -1)  # the form no longer takes mode 1 as a mean
    model = Bag("mean")
    program, count = rewritten(model, (INDICES, OFFSETS))
    assert count == 0  # and the call is not even eligible then
    monkeypatch.undo()
    real = embedding_bag._bag

    def summed(torch: Any) -> Any:
        bag = real(torch)
        return lambda *args, **kwargs: bag(*args[:4], 0, *args[5:], **kwargs)

    monkeypatch.setattr(embedding_bag, "_bag", summed)
    program, count = rewritten(model, (INDICES, OFFSETS))
    assert count == 1
    with torch.no_grad(), pytest.raises(AssertionError):
        assert_close(program.module()(INDICES, OFFSETS), model(INDICES, OFFSETS))


class BagWithSizes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(12, 6))

    def forward(self, indices: Any, offsets: Any) -> Any:
        pooled, _, bag_size, _ = torch.embedding_bag(self.weight, indices, offsets, False, 1)
        return pooled, bag_size


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_bags_sum_in_float32_and_round_once(dtype: Any) -> None:
    """ATen's CUDA kernel sums half-precision rows in float32 and rounds once; so does the
    form: exactly the float32 bag rounded, and within a rounding of ATen's CPU result."""
    weights = torch.rand(len(INDICES)).to(dtype)
    for mode, extra in (("sum", (weights,)), ("mean", ()), ("max", ())):
        model = Bag(mode, dtype=dtype, padding_idx=9)
        inputs = (INDICES, OFFSETS, *extra)
        program, count = rewritten(model, inputs)
        assert count == 1 and bag_calls(program) == []
        with torch.no_grad():
            got = program.module()(*inputs)
            want = F.embedding_bag(
                INDICES, model.weight.float(), OFFSETS, mode=mode, padding_idx=9,
                per_sample_weights=weights.float() if extra else None,
            ).to(dtype)  # fmt: skip
            assert got.dtype == dtype and torch.equal(got, want), (mode, got, want)
            aten = model(*inputs)
            ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
            assert torch.allclose(got.float(), aten.float(), rtol=ulp, atol=ulp), mode


def test_left_alone_for_other_outputs_read_or_large_max_bags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    program, count = rewritten(BagWithSizes(), (INDICES, OFFSETS))
    assert count == 0 and bag_calls(program)
    # A max bag given by offsets compares every bag with every row: static sizes, within
    # the limit (5 bags x 10 indices x 6 columns here; fixed-length bags need no limit).
    from shimkit.aot import embedding_bag

    n = torch.export.Dim("n", min=2, max=100)
    program, count = rewritten(Bag("max"), (INDICES, OFFSETS), ({0: n}, None))
    assert count == 0 and bag_calls(program)
    monkeypatch.setattr(embedding_bag, "DENSE_LIMIT", 5 * 10 * 6 - 1)
    program, count = rewritten(Bag("max"), (INDICES, OFFSETS))
    assert count == 0 and bag_calls(program)
    program, count = rewritten(Bag("max"), (INDICES.reshape(5, 2),))
    assert count == 1
    monkeypatch.setattr(embedding_bag, "DENSE_LIMIT", 5 * 10 * 6)
    program, count = rewritten(Bag("max"), (INDICES, OFFSETS))
    assert count == 1
    # One bag that must keep the fallback keeps it for all: the table rewrites every call.

    class TwoBags(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.sum, self.sizes = Bag("sum"), BagWithSizes()

        def forward(self, indices: Any, offsets: Any) -> Any:
            return self.sum(indices, offsets), *self.sizes(indices, offsets)

    program, count = rewritten(TwoBags(), (INDICES, OFFSETS))
    assert count == 0 and len(bag_calls(program)) == 2


class MeanAndMaxBags(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean, self.max = Bag("mean", padding_idx=5), Bag("max")

    def forward(self, indices: Any, offsets: Any) -> Any:
        return self.mean(indices, offsets) + self.max(indices.reshape(5, 2))


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported, in_math_form

    model = MeanAndMaxBags().eval()
    inputs = (INDICES, OFFSETS)
    exported = torch.export.export(model, inputs)
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert notes == [
        "2 embedding bag(s) compiled as a lookup and a segment sum or maximum (Inductor "
        "generates the kernels on CUDA; the slim CUDA shims would pool on the host)"
    ]
    result = compile_exported(program, tmp_path / "bag.pt2", force=True, show_progress=False)
    imports = {sym.name for blob in result.blobs.values() for sym in blob.imports}
    assert not any("embedding_bag" in name for name in imports)
    with shimkit.runtime.load(result.path) as slim, torch.no_grad():
        [got] = slim(*inputs)
        assert torch.allclose(torch.from_numpy(got), model(*inputs), rtol=1e-5, atol=1e-6)
    # Control: as exported, the blob pools with the _embedding_bag shim.
    plain = compile_exported(exported, tmp_path / "plain.pt2", force=True, show_progress=False)
    plain_imports = {sym.name for blob in plain.blobs.values() for sym in blob.imports}
    assert any("embedding_bag" in name for name in plain_imports)
