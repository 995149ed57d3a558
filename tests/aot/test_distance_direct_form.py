"""Pairwise distances computed directly (shimkit.aot.distance).

The slim CUDA shims compute the `_cdist_forward` and `_pdist_forward` fallbacks on the
host; compile rewrites such cdist and pdist calls for slim CUDA blobs into ops Inductor
generates. Here, on the CPU (the form is device-neutral; the device runs are in
docs/benchmarks.md): every p ATen has a case for (0, 1, 2, inf, another), batched and
broadcast inputs, equal rows (distance 0), pdist's pair order, against torch; the rewrite
leaves no direct cdist or pdist (control: as exported they are there), and a wrong form (p = 2
without the root) fails the same comparison (control). Left alone: Euclidean distances of
many points (ATen's dot products, no fallback), calls over the size limit, dynamic sizes,
and every call when `in_math_form` is not asked for the slim CUDA target. A rewritten
program compiles and runs on the slim CPU runtime without the fallbacks' shims.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")


class Cdist(torch.nn.Module):
    def __init__(self, p: float = 2.0, compute_mode: str | None = None) -> None:
        super().__init__()
        self.p = p
        self.mode = compute_mode or "use_mm_for_euclid_dist_if_necessary"

    def forward(self, a: Any, b: Any) -> Any:
        return torch.cdist(a, b, p=self.p, compute_mode=self.mode)


class Pdist(torch.nn.Module):
    def __init__(self, p: float = 2.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Any) -> Any:
        return torch.nn.functional.pdist(x, self.p)


def distance_calls(program: Any) -> list[str]:
    return calls_of(program, ("aten.cdist.default", "aten.pdist.default"))


def rewritten(model: Any, *inputs: Any, dynamic_shapes: Any = None) -> tuple[Any, int]:
    from shimkit.aot.distance import distances_in_direct_form

    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    assert distance_calls(exported)  # control: as exported, the call is there
    return distances_in_direct_form(torch, exported)


def with_equal_rows(a: Any, b: Any) -> tuple[Any, Any]:
    """`a`'s first row made `b`'s first: a distance of exactly 0, and p = 0's count of 0."""
    a = a.clone()
    a[..., 0, :] = b.reshape(-1, b.shape[-1])[0]
    return a, b


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, math.inf, 3.0, 0.5])
@pytest.mark.parametrize(
    "shape_a,shape_b", [((5, 7), (9, 7)), ((2, 4, 3), (2, 6, 3)), ((3, 1, 4, 5), (2, 6, 5))]
)
def test_cdist_matches_torch(p: float, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
    model = Cdist(p)
    generator = torch.Generator().manual_seed(0)
    a, b = with_equal_rows(
        torch.randn(shape_a, generator=generator), torch.randn(shape_b, generator=generator)
    )
    program, count = rewritten(model, a, b)
    assert count == 1 and distance_calls(program) == []
    for seed in range(2):
        generator.manual_seed(seed)
        x, y = with_equal_rows(
            torch.randn(shape_a, generator=generator), torch.randn(shape_b, generator=generator)
        )
        got, want = program.module()(x, y), model(x, y)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, math.inf, 1.5])
def test_pdist_matches_torch_in_its_pair_order(p: float) -> None:
    model = Pdist(p)
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(1))
    x[3] = x[5]  # one pair at distance 0
    program, count = rewritten(model, x)
    assert count == 1 and distance_calls(program) == []
    got, want = program.module()(x), model(x)
    assert got.shape == want.shape == (21,)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_zoo_recommender_matches_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["recommender"]()
    model = zoo.model.eval()
    program, count = rewritten(model, *zoo.inputs)
    assert count == 1  # the L1 distances; the Euclidean ones over 50 items take dot products
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: Euclidean distances without the root differ from torch's."""
    from shimkit.aot import distance

    monkeypatch.setattr(distance, "_reduced", lambda diff, p: diff.square().sum(-1))
    a, b = torch.randn(4, 3), torch.randn(5, 3)
    program, count = rewritten(Cdist(2.0), a, b)
    assert count == 1
    with pytest.raises(AssertionError):
        torch.testing.assert_close(program.module()(a, b), Cdist(2.0)(a, b))


def test_left_alone_where_aten_takes_dot_products_or_over_the_limit_or_dynamic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shimkit.aot import distance

    # Euclidean over more than 25 rows, or always by dot products when asked: no fallback.
    assert rewritten(Cdist(2.0), torch.randn(4, 3), torch.randn(26, 3))[1] == 0
    always_mm = Cdist(2.0, "use_mm_for_euclid_dist")
    assert rewritten(always_mm, torch.randn(4, 3), torch.randn(5, 3))[1] == 0
    # ...but any other p over as many rows, or never by dot products, reaches it.
    assert rewritten(Cdist(1.0), torch.randn(4, 3), torch.randn(26, 3))[1] == 1
    assert (
        rewritten(
            Cdist(2.0, "donot_use_mm_for_euclid_dist"), torch.randn(4, 3), torch.randn(26, 3)
        )[1]
        == 1
    )
    monkeypatch.setattr(distance, "DENSE_LIMIT", 4 * 5 * 3 - 1)
    program, count = rewritten(Cdist(1.0), torch.randn(4, 3), torch.randn(5, 3))
    assert count == 0 and distance_calls(program) == ["aten.cdist.default"]
    assert rewritten(Pdist(), torch.randn(5, 4))[1] == 1  # 10 pairs x 4 features fit
    assert rewritten(Pdist(), torch.randn(6, 4))[1] == 0  # 15 x 4 do not
    monkeypatch.undo()
    rows = torch.export.Dim("rows", min=2, max=20)
    program, count = rewritten(
        Cdist(1.0), torch.randn(4, 3), torch.randn(5, 3), dynamic_shapes=({0: rows}, None)
    )
    assert count == 0


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Cdist(1.0), (torch.randn(4, 3), torch.randn(5, 3)))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and distance_calls(same) == ["aten.cdist.default"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert distance_calls(program) == [] and notes == [
        "1 cdist/pdist call(s) computed directly from the pairwise differences (Inductor "
        "generates the kernels on CUDA; the slim CUDA shims would compute them on the host)"
    ]


class Distances(torch.nn.Module):
    def forward(self, a: Any, b: Any) -> tuple[Any, Any, Any]:
        return torch.cdist(a, b, p=1.0), torch.cdist(a, b), torch.nn.functional.pdist(b, 3.0)


@pytest.mark.slow
def test_compiled_direct_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.distance import distances_in_direct_form

    from tests.aot.math_form_run import compile_and_run

    model, inputs = Distances(), (torch.randn(6, 5), torch.randn(8, 5))
    exported = torch.export.export(model, inputs)
    program, count = distances_in_direct_form(torch, exported)
    assert count == 3
    run = compile_and_run(program, inputs, tmp_path / "distances.pt2")
    assert not any(name.endswith(("_cdist_forward", "_pdist_forward")) for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-6)
    # Control: as exported, the blob calls the fallbacks' shims.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    assert any(name.endswith("_cdist_forward") for name in plain.imports)
    assert any(name.endswith("_pdist_forward") for name in plain.imports)


class DistancesAndProducts(torch.nn.Module):
    def forward(self, a: Any, b: Any, c: Any) -> tuple[Any, Any]:
        return torch.cdist(a, b, p=1.0), torch.baddbmm(c, c, c)


def test_a_failing_form_leaves_its_calls_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A form that raises (a torch it does not know) leaves its calls to the fallback, says
    so in one line, and the other forms still run: the blob only loses that speed-up."""
    from shimkit.aot import compile as aot_compile

    def broken(torch: Any, exported: Any) -> Any:
        raise RuntimeError("a schema this form does not know\n\ntraceback ...")

    monkeypatch.setattr(aot_compile, "distances_in_direct_form", broken)
    inputs = (torch.randn(4, 3), torch.randn(5, 3), torch.randn(2, 3, 3))
    exported = torch.export.export(DistancesAndProducts(), inputs)
    program, notes = aot_compile.in_math_form(torch, exported, False, False, slim_cuda=True)
    assert distance_calls(program) == ["aten.cdist.default"]
    assert notes == [
        "cdist/pdist call(s) left as they are (their form failed: RuntimeError: a schema this "
        "form does not know)",
        "1 baddbmm/addbmm call(s) compiled as a bmm and a scaled sum (cuBLAS and Inductor on "
        "CUDA; the slim CUDA shims would compute them on the host)",
    ]
    for got, want in zip(program.module()(*inputs), DistancesAndProducts()(*inputs), strict=True):
        torch.testing.assert_close(got, want)
