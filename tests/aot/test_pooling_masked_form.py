"""2-D pools over large windows as masked reductions (shimkit.aot.pooling).

The slim CUDA shims pool on the host where Inductor leaves a pool to its fallback (windows
of more than 25 elements); compile rewrites such calls for slim CUDA blobs. Here, on the
CPU (the form is device-neutral; the device runs are in docs/benchmarks.md): max pools with
and without indices, average pools (padding counted or not, ceil_mode, a divisor override),
adaptive average and max pools, batched and unbatched, against torch, values and indices,
with ties, a window of -inf next to padding, and NaN (the value; its index is one of the
window's NaNs); the zoo's pooling net; the rewrite leaves none of those pools (control: as
exported they are there), and a wrong form (no clamp to the window's first element) fails
the same comparison (control). Left alone: windows Inductor pools itself, average pools
whose stride is their kernel, adaptive pools of equal windows, dilation, integer inputs,
passes over the size limit, dynamic sizes, and every call unless `in_math_form` is asked
for the slim CUDA target. A rewritten program compiles and runs on the slim CPU runtime
without the pools' shims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")
F = torch.nn.functional

POOLS = (
    "aten.max_pool2d.default",
    "aten.max_pool2d_with_indices.default",
    "aten.avg_pool2d.default",
    "aten.adaptive_avg_pool2d.default",
    "aten._adaptive_avg_pool2d.default",
    "aten.adaptive_max_pool2d.default",
)


class Pools(torch.nn.Module):
    """Every pool the form covers, each with windows of more than 25 elements."""

    def forward(self, x: Any) -> tuple[Any, ...]:
        most, where = F.max_pool2d(x, (7, 5), (2, 3), (3, 2), ceil_mode=True, return_indices=True)
        plain = F.max_pool2d(x, 6, 1, 3)
        uncounted = F.avg_pool2d(x, (6, 7), (4, 2), (2, 3), ceil_mode=True, count_include_pad=False)
        counted = F.avg_pool2d(x, (6, 7), (4, 2), (2, 3))
        overridden = F.avg_pool2d(x, 6, 4, divisor_override=5)
        peaks, at = F.adaptive_max_pool2d(x, (4, 3), return_indices=True)
        regions = F.adaptive_avg_pool2d(x, (5, 3))
        return most, where, plain, uncounted, counted, overridden, peaks, at, regions


def pool_calls(program: Any) -> list[str]:
    return calls_of(program, POOLS)


def rewritten(model: Any, *inputs: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.pooling import pools_in_masked_form

    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert pool_calls(exported)  # control: as exported, the calls are there
    return pools_in_masked_form(torch, exported)


def features(shape: tuple[int, ...], seed: int) -> Any:
    """Random values with a block of -inf at the top-left corner (next to the padding), a
    block of ties, and two ties that are not a block."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    x[..., :8, :8] = float("-inf")
    x[..., 3:6, 10:15] = 2.5
    # Two equal maxima, the first in row-major order to the right of the other's column.
    x[..., 12, 14] = x[..., 13, 12] = 9.0
    return x


@pytest.mark.parametrize("shape", [(2, 3, 19, 23), (3, 19, 23)])
def test_every_pool_matches_torch_values_and_indices(shape: tuple[int, ...]) -> None:
    model = Pools()
    program, count = rewritten(model, features(shape, 0))
    assert count == 7 and pool_calls(program) == []
    for seed in range(3):
        x = features(shape, seed)
        for got, want in zip(program.module()(x), model(x), strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, equal_nan=True)


def test_nan_gives_nan_and_names_a_nan() -> None:
    model = Pools()
    x = torch.randn(1, 2, 19, 23)
    x[0, 1, 9, 9] = x[0, 1, 12, 4] = float("nan")
    program, _ = rewritten(model, x)
    got, want = program.module()(x), model(x)
    for values in (0, 2, 3, 4, 5, 6, 8):
        torch.testing.assert_close(got[values], want[values], equal_nan=True)
    for values, indices in ((0, 1), (6, 7)):
        named = x.flatten(-2).gather(-1, got[indices].flatten(-2)).view_as(got[values])
        assert torch.equal(torch.isnan(named), torch.isnan(want[values]))


def test_the_zoo_pooling_net_matches_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["pooling"]()
    model = zoo.model.eval()
    program, count = rewritten(model, *zoo.inputs)
    # Both max pools, the 6x6 average pool, the adaptive max and the (3, 5) regions; the
    # global average (equal windows) is Inductor's own.
    assert count == 5 and pool_calls(program) == ["aten.adaptive_avg_pool2d.default"]
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
            torch.testing.assert_close(got, want)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: without the clamp to a window's first element, a window of -inf next to the
    padding names a padded position, not ATen's index."""
    from shimkit.aot import pooling

    monkeypatch.setattr(pooling, "_within_window", lambda torch, index, first: index)
    model, x = Pools(), features((2, 3, 19, 23), 0)
    program, _ = rewritten(model, x)
    got, want = program.module()(x), model(x)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got[1], want[1])


def test_left_alone_where_inductor_pools_or_over_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import pooling

    x = torch.randn(2, 3, 18, 18)

    class Kept(torch.nn.Module):
        def forward(self, x: Any) -> tuple[Any, ...]:
            return (
                F.max_pool2d(x, 5, 1, 2),  # 25 elements: Inductor's own
                F.avg_pool2d(x, 6, 6),  # stride = kernel: a plain reduction
                F.adaptive_avg_pool2d(x, (3, 2)),  # equal windows of 6x9
                F.adaptive_max_pool2d(x, (6, 6)),  # windows of at most 4x4
                F.max_pool2d(x, 6, 1, 2, dilation=2),  # dilation: the fallback
            )

    program, count = rewritten(Kept(), x)
    assert count == 0 and len(pool_calls(program)) == 5
    as_ints = (x * 10).to(torch.int32)

    class IntegerMax(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return F.max_pool2d(x, 6, 1, 3)

    assert rewritten(IntegerMax(), as_ints)[1] == 0
    assert rewritten(IntegerMax(), x)[1] == 1
    # The first pass of a 6x6 max pool, stride 1: [2 * 3 planes, 19 rows out, 18 x 18].
    monkeypatch.setattr(pooling, "DENSE_LIMIT", 6 * 19 * 18 * 18 - 1)
    assert rewritten(IntegerMax(), x)[1] == 0
    monkeypatch.undo()
    batch = torch.export.Dim("batch", min=2, max=8)
    assert rewritten(IntegerMax(), x, dynamic_shapes=({0: batch},))[1] == 0


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    class MaxPool(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return F.max_pool2d(x, 9, 1, 4)

    exported = torch.export.export(MaxPool(), (torch.randn(1, 2, 12, 12),))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and pool_calls(same) == ["aten.max_pool2d.default"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert pool_calls(program) == [] and notes == [
        "1 2-D pool(s) over windows of more than 25 elements compiled as masked reductions "
        "(Inductor generates the kernels on CUDA; the slim CUDA shims would pool on the host)"
    ]


@pytest.mark.slow
def test_compiled_masked_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.pooling import pools_in_masked_form

    from tests.aot.math_form_run import compile_and_run

    model, inputs = Pools(), (features((2, 3, 19, 23), 1),)
    exported = torch.export.export(model, inputs)
    program, count = pools_in_masked_form(torch, exported)
    assert count == 7
    run = compile_and_run(program, inputs, tmp_path / "pools.pt2")
    assert not any("pool" in name for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        torch.testing.assert_close(torch.from_numpy(got), want, equal_nan=True)
    # Control: as exported, the blob calls pooling shims.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    assert any("pool" in name for name in plain.imports)
