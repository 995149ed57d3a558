#!/usr/bin/env python3
"""Real models: the slim CPU runtime vs torch's AOTIModelContainerRunnerCpu, same model, same run.

Each model (ResNet-18 and MobileNetV2 at 224x224, batch 1; a GPT transformer block; an STFT
audio net; two linear algebra heads: inverses, solves, Cholesky and determinants (pose_head),
SVD, QR and eigh (geometry); definitions in tests/models/zoo.py) is compiled twice from one
ExportedProgram: prefixed with `shimkit compile`'s API for the slim runtime, and unprefixed
with `aoti_compile_and_package` for torch's runner (the audio net's and the linear algebra
heads' as exported: torch's runner keeps its own FFT kernels and LAPACK where the slim side
gets matrix products and the math forms' steps). Both are loaded in this
one process; their outputs are compared, then the two are timed in interleaved rounds (the
order alternates every round, so load spikes hit both) and the median per-call times and
their ratio are printed, with the machine's load average. Memory comes from a fresh process
that only runs the slim blob (shimkit-run-blob, no Python, no libtorch): its peak (the most
it held: peak RSS, or RSS plus the blob's memory-file pages not mapped in, or the staging
copy; bench.runtime_common.blob_memory), that peak beyond the weights' size (target < 10
MB), the same for the process's own pages alone (anonymous and memory-file: what the
runtime holds, without the libraries' file-backed pages, whose count the kernel decides),
and where the memory is after the runs: anonymous (the weights, packed for oneDNN where
a packed copy stands in for the plain one, activations), file-backed (libraries' pages) and
memory-file pages.

Compiled packages are cached under build/bench-models/ (keyed by zoo.py, the rename header,
the prefix file and torch's version).

Usage: .venv/bin/python bench/bench_models.py [--rounds R] [--calls N] [--threads T]
       [--models resnet18,mobilenet_v2,transformer_block,audio,pose_head,geometry] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# name -> (zoo factory, target ratio or None)
MODELS: dict[str, tuple[str, float | None]] = {
    "resnet18": ("resnet18", 1.0),
    "mobilenet_v2": ("mobilenet_v2_full", 1.0),
    "transformer_block": ("transformer_block", 1.0),
    "audio": ("audio", None),
    "pose_head": ("pose_head", None),
    "geometry": ("geometry", None),
}
# Models whose math forms exist for the slim runtime only (Fourier transforms as matrix
# products, linear algebra as LU, Cholesky, Householder and Jacobi steps): torch's runner
# runs the program as exported, with its own FFT kernels and LAPACK.
PEER_AS_EXPORTED = {"audio", "pose_head", "geometry"}


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5, help="calls per side per round")
    parser.add_argument(
        "--threads", type=int, default=1, help="OpenMP/BLAS/torch threads for both sides"
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


ARGS = _parse_args()
# Thread pools read these once, at their first use: set them before any import.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import shimkit.runtime as rt  # noqa: E402
import torch  # noqa: E402
from shimkit.runtime.build import build, build_run_blob  # noqa: E402

from bench.runtime_common import blob_memory, extract_so  # noqa: E402
from tests.models.packages import compiled_pair  # noqa: E402

CACHE = ROOT / "build" / "bench-models"


def time_calls(fn: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def bench_model(label: str, rounds: int, calls: int, run_blob: Path) -> dict[str, Any]:
    zoo_name, target = MODELS[label]
    pair = compiled_pair(zoo_name, CACHE, twin_as_exported=label in PEER_AS_EXPORTED)
    inputs = [t.numpy() for t in pair.inputs]
    ours = rt.load(pair.prefixed)
    stand_ins, allowed = ours.source.stand_ins, ours.stand_ins
    twin_so = extract_so(pair.unprefixed, CACHE)
    runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(twin_so), 1)
    tensors = list(pair.inputs)
    ours_out = ours(*inputs)
    torch_out = [t.numpy() for t in runner.run(tensors)]
    diff = max(
        float(np.max(np.abs(a - b) / (np.abs(b) + 1e-3)))
        for a, b in zip(ours_out, torch_out, strict=True)
    )

    def ours_call() -> Any:
        return ours(*inputs)

    def torch_call() -> Any:
        return runner.run(tensors)

    for fn in (ours_call, torch_call):
        time_calls(fn, 2)  # warm-up: primitives, packed weights, caches
    ours_ms, torch_ms, loads = [], [], []
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        pair_order = (ours_call, torch_call) if r % 2 == 0 else (torch_call, ours_call)
        for fn in pair_order:
            ms = time_calls(fn, calls)
            (ours_ms if fn is ours_call else torch_ms).append(ms)
    ours.close()
    # As shimkit.runtime.load runs the package: its convolution weights packed alone.
    cold = blob_memory(run_blob, extract_so(pair.prefixed, CACHE), inputs, stand_ins=stand_ins)
    end = cold["memory"][-1]
    weights_mb = pair.weight_bytes / 2**20
    ours_med, torch_med = statistics.median(ours_ms), statistics.median(torch_ms)
    return {
        "model": label,
        "max_rel_diff_vs_torch_runner": diff,
        "ours_ms": ours_med,
        "torch_ms": torch_med,
        "ratio": ours_med / torch_med,
        "round_ratios": [o / t for o, t in zip(ours_ms, torch_ms, strict=True)],
        "target_ratio": target,
        "load_avg": [min(loads), max(loads)],
        "weights_mb": weights_mb,
        "ours_max_rss_mb": cold["max_rss_kb"] / 1024,
        "ours_peak_mb": cold["peak_kb"] / 1024,
        "ours_peak_beyond_weights_mb": cold["peak_kb"] / 1024 - weights_mb,
        "ours_own_peak_beyond_weights_mb": cold["own_peak_kb"] / 1024 - weights_mb,
        "ours_end_mb": {k: end[f"{k}_kb"] / 1024 for k in ("anon", "file", "memfd")},
        "ours_memory_phases": cold["memory"],
        "ours_stand_ins": {
            "wrapper": len(stand_ins),
            "allowed": allowed,
            "run_blob": cold["stand_ins"],
        },
        "ours_run_blob_ms": cold["us_per_run"] / 1e3,
    }


def main() -> int:
    args = ARGS
    torch.set_num_threads(args.threads)
    run_blob = build_run_blob(build())
    results = [
        bench_model(name, args.rounds, args.calls, run_blob) for name in args.models.split(",")
    ]
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds x {args.calls} calls per side, interleaved, medians"
    )
    print(
        "| model | slim ms | torch runner ms | ratio (target) [per round] | max rel diff "
        "| load avg | weights MB | slim peak MB (shimkit-run-blob) | beyond weights (< 10) "
        "| own pages beyond weights | at the end: anon / file / memfd MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        target = r["target_ratio"]
        verdict = "no target" if target is None else f"<= {target}x: "
        if target is not None:
            verdict += "met" if r["ratio"] <= target else "MISSED"
        per_round = " ".join(f"{x:.2f}" for x in r["round_ratios"])
        print(
            f"| {r['model']} | {r['ours_ms']:.2f} | {r['torch_ms']:.2f} | "
            f"{r['ratio']:.2f}x ({verdict}) [{per_round}] | "
            f"{r['max_rel_diff_vs_torch_runner']:.1e} | "
            f"{r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f} | {r['weights_mb']:.1f} | "
            f"{r['ours_peak_mb']:.1f} | +{r['ours_peak_beyond_weights_mb']:.1f} "
            f"({'met' if r['ours_peak_beyond_weights_mb'] < 10 else 'MISSED'}) | "
            f"+{r['ours_own_peak_beyond_weights_mb']:.1f} | "
            + " / ".join(f"{v:.1f}" for v in r["ours_end_mb"].values())
            + " |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
