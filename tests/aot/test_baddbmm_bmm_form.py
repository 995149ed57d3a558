"""baddbmm and addbmm as a bmm and a scaled sum (shimkit.aot.baddbmm).

The slim CUDA shims compute both on the host; compile rewrites them for slim CUDA blobs into
a bmm (cuBLAS) and a sum Inductor generates. Here, on the CPU (the form is device-neutral):
both ops with default and other alpha and beta, a broadcast input, beta = 0 ignoring a NaN
input as ATen does, the zoo's pooling net, against torch; the rewrite leaves neither op
(control: as exported they are there), and a wrong form (alpha dropped) fails the same
comparison (control). Nothing changes unless `in_math_form` is asked for the slim CUDA
target. A rewritten program compiles and runs on the slim CPU runtime through the bmm shim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aot.math_form_run import calls_of

torch = pytest.importorskip("torch")


class Baddbmm(torch.nn.Module):
    def __init__(self, beta: float = 1.0, alpha: float = 1.0, summed: bool = False) -> None:
        super().__init__()
        self.beta, self.alpha = beta, alpha
        self.op = torch.addbmm if summed else torch.baddbmm

    def forward(self, input: Any, a: Any, b: Any) -> Any:
        return self.op(input, a, b, beta=self.beta, alpha=self.alpha)


def product_calls(program: Any) -> list[str]:
    return calls_of(program, ("aten.baddbmm.default", "aten.addbmm.default"))


def rewritten(model: Any, *inputs: Any) -> tuple[Any, int]:
    from shimkit.aot.baddbmm import batched_products_in_bmm_form

    exported = torch.export.export(model, inputs)
    assert product_calls(exported)  # control: as exported, the call is there
    return batched_products_in_bmm_form(torch, exported)


def operands(input_shape: tuple[int, ...], seed: int = 0) -> tuple[Any, Any, Any]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(input_shape, generator=generator),
        torch.randn(3, 4, 5, generator=generator),
        torch.randn(3, 5, 6, generator=generator),
    )


@pytest.mark.parametrize(
    "beta,alpha,summed,input_shape",
    [
        (1.0, 1.0, False, (3, 4, 6)),
        (0.5, 0.25, False, (4, 6)),  # the input broadcast over the batch
        (1.0, 2.0, False, (1, 4, 1)),
        (1.0, 1.0, True, (4, 6)),
        (-2.0, 0.5, True, (6,)),
    ],
)
def test_matches_torch(
    beta: float, alpha: float, summed: bool, input_shape: tuple[int, ...]
) -> None:
    model = Baddbmm(beta, alpha, summed)
    program, count = rewritten(model, *operands(input_shape))
    assert count == 1 and product_calls(program) == []
    for seed in range(3):
        inputs = operands(input_shape, seed)
        got, want = program.module()(*inputs), model(*inputs)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("summed", [False, True])
def test_beta_zero_ignores_the_input_nan_included(summed: bool) -> None:
    model = Baddbmm(0.0, 1.5, summed)
    input, a, b = operands((4, 6))
    input[0, 0] = float("nan")
    program, _ = rewritten(model, input, a, b)
    got = program.module()(input, a, b)
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, model(input, a, b), rtol=1e-5, atol=1e-5)


def test_the_zoo_pooling_net_matches_eager() -> None:
    from tests.models.zoo import ZOO

    zoo = ZOO["pooling"]()
    model = zoo.model.eval()
    program, count = rewritten(model, *zoo.inputs)
    assert count == 1
    with torch.no_grad():
        for got, want in zip(program.module()(*zoo.inputs), model(*zoo.inputs), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_a_wrong_form_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the product without alpha is another result."""
    from shimkit.aot import baddbmm

    original = baddbmm._scaled_sum
    monkeypatch.setattr(
        baddbmm,
        "_scaled_sum",
        lambda product, input, beta, alpha: original(product, input, beta, 1),
    )
    model, inputs = Baddbmm(1.0, 0.5), operands((3, 4, 6))
    program, count = rewritten(model, *inputs)
    assert count == 1
    with pytest.raises(AssertionError):
        torch.testing.assert_close(program.module()(*inputs), model(*inputs))


def test_only_for_the_slim_cuda_target() -> None:
    from shimkit.aot.compile import in_math_form

    exported = torch.export.export(Baddbmm(), operands((3, 4, 6)))
    same, notes = in_math_form(torch, exported, False, False)
    assert notes == [] and product_calls(same) == ["aten.baddbmm.default"]
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert product_calls(program) == [] and notes == [
        "1 baddbmm/addbmm call(s) compiled as a bmm and a scaled sum (cuBLAS and Inductor on "
        "CUDA; the slim CUDA shims would compute them on the host)"
    ]


class BothProducts(torch.nn.Module):
    def forward(self, input: Any, a: Any, b: Any) -> tuple[Any, Any]:
        return torch.baddbmm(input, a, b, alpha=0.5), torch.addbmm(input[0], a, b, beta=2.0)


@pytest.mark.slow
def test_compiled_bmm_form_runs_on_the_slim_runtime(tmp_path: Path) -> None:
    from shimkit.aot.baddbmm import batched_products_in_bmm_form

    from tests.aot.math_form_run import compile_and_run

    model, inputs = BothProducts(), operands((3, 4, 6))
    exported = torch.export.export(model, inputs)
    program, count = batched_products_in_bmm_form(torch, exported)
    assert count == 2
    run = compile_and_run(program, inputs, tmp_path / "products.pt2")
    assert any(name.endswith("aoti_torch_cpu_bmm_out") for name in run.imports)
    assert not any(name.endswith(("baddbmm_out", "addbmm")) for name in run.imports)
    for got, want in zip(run.outputs, model(*inputs), strict=True):
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-5)
    # Control: as exported, the blob calls baddbmm's shim.
    plain = compile_and_run(exported, inputs, tmp_path / "plain.pt2")
    assert any(name.endswith("baddbmm_out") for name in plain.imports)
