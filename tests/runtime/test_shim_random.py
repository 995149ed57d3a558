"""Random draws of the slim CPU shims (shim_random.cpp), called directly and through a
compiled model: integers in [low, high) over any range (the whole int64 range is how an
Inductor program seeds its random ops), the same draws after the same seed
(shimkit_shim_manual_seed, shimkit.runtime.manual_seed), new ones otherwise; bad arguments
fail with a message."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
import torch

from tests.runtime.shimcall import TorchShims, ints


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def draw(sh: TorchShims, out: torch.Tensor, low: int, high: int) -> int:
    return sh.call(
        "aoti_torch_cpu_randint_low_out", sh.tensor(out), ctypes.c_int64(low),
        ctypes.c_int64(high), ints(*out.shape), ctypes.c_int64(out.dim()),
    )  # fmt: skip


def seed(sh: TorchShims, value: int) -> None:
    sh.lib.shimkit_shim_manual_seed(ctypes.c_uint64(value))  # not a shim: no prefix


def test_draws_cover_the_range_and_only_it(sh: TorchShims) -> None:
    out = torch.zeros(4, 500, dtype=torch.int64)
    assert draw(sh, out, -3, 7) == 0, sh.error()
    assert set(out.unique().tolist()) == set(range(-3, 7))
    floats = torch.zeros(1000, dtype=torch.float64)
    assert draw(sh, floats, 0, 2) == 0, sh.error()
    assert set(floats.unique().tolist()) == {0.0, 1.0}
    # Inductor's seeds: the whole int64 range, both signs, no repeats.
    seeds = torch.zeros(64, dtype=torch.int64)
    assert draw(sh, seeds, -(2**63), 2**63 - 1) == 0, sh.error()
    assert len(seeds.unique()) == 64 and (seeds < 0).any() and (seeds > 0).any()


def test_same_seed_same_draws(sh: TorchShims) -> None:
    first, again, other = (torch.zeros(32, dtype=torch.int64) for _ in range(3))
    seed(sh, 11)
    draw(sh, first, 0, 1 << 40)
    seed(sh, 11)
    draw(sh, again, 0, 1 << 40)
    seed(sh, 12)
    draw(sh, other, 0, 1 << 40)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)  # control: the seed matters


@pytest.mark.parametrize(
    "out,low,high,message",
    [
        (torch.zeros(4, dtype=torch.int64), 5, 5, "low must be below high"),
        (torch.zeros(4, dtype=torch.bool), 0, 2, "randint: out of dtype bool"),
    ],
)
def test_bad_arguments_fail_with_a_message(
    sh: TorchShims, out: torch.Tensor, low: int, high: int, message: str
) -> None:
    assert draw(sh, out, low, high) != 0
    assert message in sh.error()


def test_size_must_match_out(sh: TorchShims) -> None:
    out = torch.zeros(4, dtype=torch.int64)
    rc = sh.call(
        "aoti_torch_cpu_randint_low_out", sh.tensor(out), ctypes.c_int64(0), ctypes.c_int64(9),
        ints(5), ctypes.c_int64(1),
    )  # fmt: skip
    assert rc != 0 and "the size asks for 5" in sh.error()


class Sampler(torch.nn.Module):
    """A VAE's reparameterised sample and uniform noise: random ops inside the model."""

    def forward(self, mu: torch.Tensor, log_var: torch.Tensor) -> tuple[torch.Tensor, ...]:
        eps = torch.randn_like(mu)
        return mu + eps * torch.exp(0.5 * log_var), torch.rand(3, 1000)


@pytest.mark.slow
def test_random_ops_run_in_a_compiled_model(tmp_path: Any) -> None:
    import shimkit.runtime
    from shimkit.aot.compile import compile_model

    zeros = torch.zeros(2, 5000)
    result = compile_model(Sampler(), (zeros, zeros), tmp_path / "sampler.pt2", show_progress=False)
    imports = [s.name for blob in result.blobs.values() for s in blob.imports]
    assert any(name.endswith("aoti_torch_cpu_randint_low_out") for name in imports)
    z = zeros.numpy()
    with shimkit.runtime.load(result.path) as model:
        sample, uniform = model(z, z)
        assert abs(sample.mean()) < 0.05 and abs(sample.std() - 1.0) < 0.05
        assert uniform.min() >= 0.0 and uniform.max() < 1.0 and abs(uniform.mean() - 0.5) < 0.02
        assert not np.array_equal(model(z, z)[0], sample)  # a new draw every run
        shimkit.runtime.manual_seed(5)
        first = model(z, z)
        shimkit.runtime.manual_seed(5)
        again = model(z, z)
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
