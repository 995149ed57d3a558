"""Average and adaptive pools Inductor leaves to fallbacks, as masked reductions
(shimkit.aot.pooling).

The slim CUDA shims pool on the host where Inductor leaves a pool to its fallback (average
pools over windows of more than 25 elements, 2-D adaptive pools with such windows, 3-D
adaptive pools); compile rewrites such calls for slim CUDA blobs. Here, on the CPU (the form
is device-neutral): 2-D and 3-D average pools (padding counted or not, ceil_mode, a divisor
override), adaptive average and max pools, batched and unbatched, against torch, values and
indices, with ties in a block and apart, a window of -inf, and NaN (the value; its index is
one of the window's NaNs); the zoo's pooling and video nets; the rewrite leaves none of
those pools (control: as exported they are there), and a wrong form (no move to the
window's first element) fails the same comparison (control). Left alone: max pools (any
window: Inductor generates them), windows Inductor pools itself, average pools whose stride
is their kernel, 2-D adaptive pools of equal windows, the 3-D global average, integer
inputs, passes over the size limit, dynamic sizes, and every call unless `in_math_form` is
asked for the slim CUDA target. A rewritten program compiles and runs on the slim CPU
runtime without the pools' shims.
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
    "aten.max_pool3d_with_indices.default",
    "aten.avg_pool2d.default",
    "aten.avg_pool3d.default",
    "aten.adaptive_avg_pool2d.default",
    "aten.adaptive_avg_pool3d.default",
    "aten.adaptive_max_pool2d.default",
    "aten.adaptive_max_pool3d.default",
)
# What Pools leaves to Inductor: its max pool and the 3-D global average.
LEFT = ["aten.max_pool2d_with_indices.default", "aten.adaptive_avg_pool3d.default"]


class Pools(torch.nn.Module):
    """Every pool the form covers, 2-D and 3-D, and two it leaves to Inductor."""

    def forward(self, x: Any, v: Any) -> tuple[Any, ...]:
        most, where = F.max_pool2d(x, (7, 5), (2, 3), (3, 2), ceil_mode=True, return_indices=True)
        peaks, at = F.adaptive_max_pool2d(x, (4, 3), return_indices=True)
        volume_peaks, volume_at = F.adaptive_max_pool3d(v, (1, 2, 2), return_indices=True)
        return (
            most, where, peaks, at, volume_peaks, volume_at,
            F.avg_pool2d(x, (6, 7), (4, 2), (2, 3), ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x, (6, 7), (4, 2), (2, 3)),
            F.avg_pool2d(x, 6, 4, divisor_override=5),
            F.adaptive_avg_pool2d(x, (5, 3)),
            F.avg_pool3d(v, 3, 2, 1),
            F.avg_pool3d(v, (3, 4, 3), (1, 2, 2), (1, 2, 0), True, count_include_pad=False),
            F.adaptive_avg_pool3d(v, (2, 4, 3)),
            F.adaptive_avg_pool3d(v, 1),
        )  # fmt: skip


def pool_calls(program: Any) -> list[str]:
    return calls_of(program, POOLS)


def rewritten(model: Any, *inputs: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.pooling import pools_in_masked_form

    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert pool_calls(exported)  # control: as exported, the calls are there
    return pools_in_masked_form(torch, exported)


def features(seed: int, batched: bool = True) -> tuple[Any, Any]:
    """An image and a volume of random values, each with a block of -inf at a corner (next
    to the padding), a block of ties, and two ties that are not a block."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 19, 23, generator=generator)
    x[..., :8, :8] = float("-inf")
    x[..., 3:6, 10:15] = 2.5
    # Two equal maxima, the first in row-major order to the right of the other's column.
    x[..., 12, 14] = x[..., 13, 12] = 9.0
    v = torch.randn(2, 3, 5, 9, 11, generator=generator)
    v[..., 0, :3, :3] = float("-inf")
    v[..., 1, 2, 7] = v[..., 1, 3, 2] = 9.0
    return (x, v) if batched else (x[0], v[0])


@pytest.mark.parametrize("batched", [True, False])
def test_every_pool_matches_torch_values_and_indices(batched: bool) -> None:
    model = Pools()
    program, count = rewritten(model, *features(0, batched))
    assert count == 9 and pool_calls(program) == LEFT
    for seed in range(3):
        inputs = features(seed, batched)
        for got, want in zip(program.module()(*inputs), model(*inputs), strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, equal_nan=True)


def test_nan_gives_nan_and_names_a_nan() -> None:
    model = Pools()
    x, v = features(0)
    x[0, 1, 9, 9] = x[0, 1, 12, 4] = float("nan")
    v[1, 2, 3, 4, 5] = v[1, 2, 3, 6, 1] = float("nan")
    program, _ = rewritten(model, x, v)
    got, want = program.module()(x, v), model(x, v)
    for index in (0, 2, 4, *range(6, 14)):  # the values
        torch.testing.assert_close(got[index], want[index], equal_nan=True)
    for values, indices, source in ((2, 3, x), (4, 5, v)):
        pooled = got[indices].flatten(2)
        named = source.flatten(2).gather(-1, pooled).view_as(got[values])
        assert torch.equal(torch.isnan(named), torch.isnan(want[values]))


@pytest.mark.parametrize(
    "name,count,left",
    [
        # The 6x6 average pool, the adaptive max and the (3, 5) regions; the max pools and the
        # global average (equal windows) are Inductor's own.
        ("pooling", 3, ["aten.max_pool2d_with_indices.default", "aten.max_pool2d.default",
                        "aten.adaptive_avg_pool2d.default"]),
        # The 3x3x3 average pool, the adaptive max and the (2, 4, 4) regions.
        ("video", 3, ["aten.max_pool3d_with_indices.default", "aten.adaptive_avg_pool3d.default"]),
    ],
)  # fmt: skip
def test_the_zoo_nets_match_eager(name: str, count: int, left: list[str]) -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO[name]()
    model = zoo.model.eval()
    program, rewrote = rewritten(model, *zoo.inputs)
    assert rewrote == count and pool_calls(program) == left
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
            torch.testing.assert_close(got, want)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: without the move to a window's first element, a window of -inf only names
    the input's first position, not the window's first as ATen does."""
    from shimkit.aot import pooling

    model, inputs = Pools(), features(0)
    program, _ = rewritten(model, *inputs)
    everywhere = tuple(torch.full_like(t, float("-inf")) for t in inputs)
    for indices in (3, 5):  # the adaptive max pools' indices, 2-D and 3-D
        torch.testing.assert_close(
            program.module()(*everywhere)[indices], model(*everywhere)[indices]
        )
    monkeypatch.setattr(pooling, "_within_window", lambda torch, index, first: index)
    program, _ = rewritten(model, *inputs)
    for indices in (3, 5):
        with pytest.raises(AssertionError):
            torch.testing.assert_close(
                program.module()(*everywhere)[indices], model(*everywhere)[indices]
            )


class Kept(torch.nn.Module):
    def forward(self, x: Any) -> tuple[Any, ...]:
        return (
            F.max_pool2d(x, 9, 1, 4),  # max pools: Inductor's own, any window
            F.avg_pool2d(x, 5, 1, 2),  # 25 elements: Inductor's own
            F.avg_pool2d(x, 6, 6),  # stride = kernel: a plain reduction
            F.adaptive_avg_pool2d(x, (3, 2)),  # equal windows of 6x9
            F.adaptive_max_pool2d(x, (6, 6)),  # windows of at most 4x4
        )


class AveragePool(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return F.avg_pool2d(x, 6, 1, 3)


def test_left_alone_where_inductor_pools_or_over_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import pooling

    x = torch.randn(2, 3, 18, 18)
    program, count = rewritten(Kept(), x)
    assert count == 0 and len(pool_calls(program)) == 5
    assert rewritten(AveragePool(), x.double())[1] == 1
    # The first pass: every element of x times the 19 windows along a dim.
    monkeypatch.setattr(pooling, "DENSE_LIMIT", 2 * 3 * 18 * 18 * 19 - 1)
    assert rewritten(AveragePool(), x)[1] == 0
    monkeypatch.undo()
    batch = torch.export.Dim("batch", min=2, max=8)
    assert rewritten(AveragePool(), x, dynamic_shapes=({0: batch},))[1] == 0


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(AveragePool(), (torch.randn(1, 2, 12, 12),))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and pool_calls(same) == ["aten.avg_pool2d.default"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert pool_calls(program) == [] and notes == [
        "1 average or adaptive pool(s) compiled as masked reductions (Inductor generates the "
        "kernels on CUDA; the slim CUDA shims would pool on the host)"
    ]


@pytest.mark.slow
def test_compiled_masked_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.pooling import pools_in_masked_form

    from tests.aot.math_form_run import compile_and_run

    model, inputs = Pools(), features(1)
    exported = torch.export.export(model, inputs)
    program, count = pools_in_masked_form(torch, exported)
    assert count == 9
    run = compile_and_run(program, inputs, tmp_path / "pools.pt2")
    assert not any(("avg_pool" in name or "adaptive" in name) for name in run.imports)
    for index, (got, want) in enumerate(zip(run.outputs, model(*inputs), strict=True)):
        if index == 1:
            # The max pool left to Inductor: its own kernel names another element than ATen
            # for a window of only -inf (the value is the same); not this form's.
            continue
        torch.testing.assert_close(torch.from_numpy(got), want, equal_nan=True)
    # Control: as exported, the blob calls the average and adaptive pools' shims.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    assert any("adaptive_max_pool3d" in name for name in plain.imports)
