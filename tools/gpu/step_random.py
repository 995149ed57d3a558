"""GPU experiment step: random ops and categorical sampling compiled for the slim CUDA runtime.

A VAE-style sampler (`randn_like`, `rand`) and a next-token sampler (`torch.multinomial`,
which compile rewrites with the Gumbel-max trick) are exported on CUDA, compiled the way
`shimkit compile --device cuda` does and run on the slim CUDA runtime, eagerly and with
CUDA-graph replay. The draws cannot equal torch's; they are checked for what they must be:
randn's mean and standard deviation, rand's range, the sampler's frequencies against its
probabilities (category of probability 0 never drawn), a new draw every run (also every
replay: each launch draws the seeds anew), and the same draws after the same
`shimkit.runtime.manual_seed(seed, device="cuda")` (control: another seed gives others);
then the time of a run, eager and replayed, each synchronised: the median of a call from
Python (outputs copied to host arrays) and the mean with inputs and outputs on the GPU.

    SHIMKIT_LIB_DIR=BUILD_DIR python3 step_random.py OUT_JSON WORK_DIR
"""

from __future__ import annotations

import faulthandler
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PROBS = [0.1, 0.2, 0.0, 0.3, 0.4]


def samplers() -> tuple[Any, Any]:
    import torch

    class Reparameterise(torch.nn.Module):
        def forward(self, mu: torch.Tensor, log_var: torch.Tensor) -> tuple[torch.Tensor, ...]:
            eps = torch.randn_like(mu)
            return mu + eps * torch.exp(0.5 * log_var), torch.rand(3, 1000, device=mu.device)

    class NextToken(torch.nn.Module):
        def forward(self, logits: torch.Tensor) -> torch.Tensor:
            return torch.multinomial(torch.softmax(logits, dim=-1), 1)

    return Reparameterise(), NextToken()


def compiled(model: Any, inputs: tuple[Any, ...], pt2: Path) -> tuple[Path, list[str]]:
    import torch
    from shimkit.aot.compile import compile_exported, in_math_form

    exported = torch.export.export(model, inputs)
    exported, notes = in_math_form(torch, exported, True, True, slim_cuda=True)
    compile_exported(exported, pt2, force=True, label=pt2.stem, show_progress=False,
                     target="slim-cuda", device="cuda")  # fmt: skip
    return pt2, notes


def checks(run: Any, inputs: tuple[Any, ...], describe: Any) -> dict[str, object]:
    """What the draws of `run` must satisfy, for one way of running (eager or replay)."""
    import shimkit.runtime

    first = [np.asarray(o) for o in run(*inputs)]
    second = [np.asarray(o) for o in run(*inputs)]
    shimkit.runtime.manual_seed(11, device="cuda")
    seeded = [np.asarray(o) for o in run(*inputs)]
    shimkit.runtime.manual_seed(11, device="cuda")
    again = [np.asarray(o) for o in run(*inputs)]
    shimkit.runtime.manual_seed(12, device="cuda")
    other = [np.asarray(o) for o in run(*inputs)]
    return {
        **describe(first),
        "median_us": median_run_us(run, inputs),
        "device_resident_us": round(run.bench(*inputs, iterations=500) / 1e3, 1),
        "new_draw_every_run": not equal(first, second),
        "same_seed_same_draws": equal(seeded, again),
        "other_seed_other_draws": not equal(seeded, other),
    }


def median_run_us(run: Any, inputs: tuple[Any, ...], runs: int = 200) -> float:
    """The median wall time of one run, synchronised after each (after 20 warm-up runs)."""
    import time

    import torch

    times = []
    for i in range(runs + 20):
        start = time.perf_counter()
        run(*inputs)
        torch.cuda.synchronize()
        if i >= 20:
            times.append(time.perf_counter() - start)
    return round(float(np.median(times)) * 1e6, 1)


def equal(left: list[np.ndarray], right: list[np.ndarray]) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(left, right, strict=True))


def describe_reparameterised(outputs: list[np.ndarray]) -> dict[str, object]:
    sample, uniform = outputs
    return {
        "randn_mean": round(float(sample.mean()), 4),
        "randn_std": round(float(sample.std()), 4),
        "rand_min": float(uniform.min()),
        "rand_max": float(uniform.max()),
        "ok": bool(
            abs(sample.mean()) < 0.05
            and abs(sample.std() - 1) < 0.05
            and uniform.min() >= 0
            and uniform.max() < 1
        ),
    }


def describe_next_token(outputs: list[np.ndarray]) -> dict[str, object]:
    tokens = outputs[0].reshape(-1)
    freq = np.bincount(tokens, minlength=len(PROBS)) / tokens.size
    return {
        "frequencies": [round(float(f), 4) for f in freq],
        "ok": bool(np.abs(freq - PROBS).max() < 0.01 and freq[2] == 0),
    }


def main() -> int:
    faulthandler.enable()
    out, work = Path(sys.argv[1]), Path(sys.argv[2])
    import shimkit.runtime
    import torch

    report: dict[str, Any] = {}
    reparameterise, next_token = samplers()
    zeros = torch.zeros(2, 5000, device="cuda")
    logits = torch.tensor(PROBS, device="cuda").clamp_min(1e-30).log().expand(20000, -1)
    cases = [
        ("reparameterise", reparameterise, (zeros, zeros), describe_reparameterised),
        ("next_token", next_token, (logits.contiguous(),), describe_next_token),
    ]
    for name, model, inputs, describe in cases:
        pt2, notes = compiled(model, inputs, work / f"random_{name}.pt2")
        entry: dict[str, Any] = {"math_form": notes}
        for graphs in (False, True):
            with shimkit.runtime.load(pt2, device="cuda", graphs=graphs) as slim:
                entry["replay" if graphs else "eager"] = checks(slim, inputs, describe)
                if graphs:
                    entry["graph_status"] = slim.graph_status
        report[name] = entry
        out.write_text(json.dumps(report, indent=1))
    ok = all(e[k]["ok"] and e[k]["new_draw_every_run"] and e[k]["same_seed_same_draws"]
             and e[k]["other_seed_other_draws"]
             for e in report.values() for k in ("eager", "replay"))  # fmt: skip
    report["all_ok"] = ok
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
