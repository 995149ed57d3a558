"""Categorical sampling in its math form (shimkit.aot.sampling).

No torch has a C shim for `aten.multinomial`, so a model that samples in its graph compiled
into a blob that needs libtorch's proxy executor. Compile now rewrites each call with the
Gumbel-max trick over Inductor's own random draws. The samples cannot equal torch's (other
random numbers); here they follow its distribution: frequencies with and without
replacement, categories of probability 0 never drawn, no repeats without replacement
(control: a wrong rewrite, uniform over the categories, fails the same frequency check).
A compiled sampler runs on the slim CPU runtime and repeats after the same seed (control:
without the rewrite, compile refuses it, naming the op).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

PROBS = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.4], dtype=torch.float64)


class Sample(torch.nn.Module):
    def __init__(self, k: int, replacement: bool) -> None:
        super().__init__()
        self.k, self.replacement = k, replacement

    def forward(self, weights: Any) -> Any:
        return torch.multinomial(weights, self.k, self.replacement)


def rewritten_sampler(k: int, replacement: bool, rows: int) -> Any:
    from shimkit.aot.sampling import multinomial_in_math_form

    weights = (PROBS * 3).expand(rows, -1).contiguous()  # unnormalised, as torch allows
    exported = torch.export.export(Sample(k, replacement), (weights,))
    rewritten, count = multinomial_in_math_form(torch, exported, only_without_shim=False)
    assert count == 1
    assert "aten.multinomial.default" not in {str(n.target) for n in rewritten.graph.nodes}
    return rewritten.module(), weights


def frequencies(samples: Any) -> Any:
    return torch.bincount(samples.flatten(), minlength=len(PROBS)).double() / samples.numel()


def test_with_replacement_follows_the_distribution() -> None:
    torch.manual_seed(1)
    sampler, weights = rewritten_sampler(200, True, 100)
    samples = sampler(weights)
    assert samples.shape == (100, 200) and samples.dtype == torch.int64
    assert torch.allclose(frequencies(samples), PROBS, atol=0.01)  # 20000 draws
    assert (samples != 2).all()  # probability 0


def test_without_replacement_draws_each_category_once_in_sampling_order() -> None:
    torch.manual_seed(2)
    sampler, weights = rewritten_sampler(3, False, 20000)
    samples = sampler(weights)
    assert samples.shape == (20000, 3)
    assert all(len(set(row)) == 3 for row in samples[:500].tolist())
    assert (samples != 2).all()
    # The first draw follows p; the second p renormalised without the first.
    assert torch.allclose(frequencies(samples[:, 0]), PROBS, atol=0.015)
    second_after_largest = samples[samples[:, 0] == 4][:, 1]
    rest = PROBS.clone()
    rest[4] = 0
    assert torch.allclose(frequencies(second_after_largest), rest / rest.sum(), atol=0.03)


def test_control_a_uniform_draw_fails_the_frequency_check() -> None:
    samples = torch.randint(0, len(PROBS), (100, 200))
    assert not torch.allclose(frequencies(samples), PROBS, atol=0.01)


def test_left_alone_where_torch_has_the_shim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shimkit.aot import sampling

    exported = torch.export.export(Sample(2, False), (PROBS.expand(3, -1).contiguous(),))
    monkeypatch.setattr(sampling, "torch_has_c_shim", lambda name: True)
    same, count = sampling.multinomial_in_math_form(torch, exported)
    assert count == 0 and same is exported


class NextToken(torch.nn.Module):
    """A language model's head that samples the next token at a temperature."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(16, 50)

    def forward(self, hidden: Any) -> Any:
        probs = torch.softmax(self.head(hidden) / 0.8, dim=-1)
        return torch.multinomial(probs, 1), probs.argmax(-1)


@pytest.mark.slow
def test_compiled_sampler_runs_on_the_slim_runtime(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    import shimkit.runtime
    from shimkit.aot import sampling
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    torch.manual_seed(3)
    model = NextToken().eval()
    inputs = (torch.randn(64, 16) * 25,)
    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    assert notes == [
        "1 multinomial call(s) compiled in their math form (Gumbel-max over the runtime's "
        "random draws; this torch has no C shim for it)"
    ]
    result = compile_exported(exported, tmp_path / "sampler.pt2", force=True, show_progress=False)
    x = inputs[0].numpy()
    with shimkit.runtime.load(result.path) as slim:
        shimkit.runtime.manual_seed(9)
        tokens, greedy = slim(x)
        shimkit.runtime.manual_seed(9)
        again, _ = slim(x)
        others = [slim(x)[0] for _ in range(5)]
    assert tokens.shape == (64, 1) and ((tokens >= 0) & (tokens < 50)).all()
    assert np.array_equal(tokens, again)  # the same seed, the same tokens
    assert any(not np.array_equal(tokens, o) for o in others)  # new draws otherwise
    # Confident rows (the softmax's top above 0.99) sample their argmax.
    with torch.no_grad():
        probs = torch.softmax(model.head(inputs[0]) / 0.8, dim=-1)
    sure = (probs.max(-1).values > 0.99).numpy()
    assert sure.any() and (tokens[sure, 0] == greedy[sure]).mean() > 0.95
    # Control: without the rewrite the blob needs libtorch's proxy executor, and compile
    # refuses it, naming the op.
    monkeypatch.setattr(sampling, "torch_has_c_shim", lambda name: True)
    raw, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    assert notes == []
    with pytest.raises(ShimkitError, match="multinomial"):
        compile_exported(raw, tmp_path / "raw.pt2", force=True, show_progress=False)
