#!/usr/bin/env python3
"""Slim runtime vs torch's AOTIModelContainerRunnerCpu, side by side in one run.

Both run the same model compiled the same way; torch's runner gets the
unprefixed twin (it binds to libtorch), the slim runtime the prefixed blob.
Both live in this one process, next to each other. Measured:

- per-call latency from Python (median of rounds; interleaved): `Model.__call__`
  (its C extension fast call; how many calls took it is printed), the same
  model through ctypes only (SHIMKIT_FASTCALL=0), and torch's runner.run;
- the same in C/C++ loops with no Python at all: the slim C API vs torch's C++
  AOTIModelContainerRunnerCpu (compiled here against the wheel);
- cold load + first run, each in a fresh process (slim: the C program
  shimkit-run-blob; torch: a Python process, timed after `import torch`);
- peak RSS of a process that only runs the blob (same two processes).

Usage: .venv/bin/python bench/bench_runtime.py [--calls N] [--rounds R] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OpenMP/BLAS/torch threads for both sides (default 1: stable on a shared box)",
    )
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


ARGS = _parse_args()
# Thread pools read these once, at their first use: set them before any import.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import shimkit.runtime as rt  # noqa: E402
import torch  # noqa: E402
from shimkit.runtime import fastcall  # noqa: E402
from shimkit.runtime.build import build, build_run_blob  # noqa: E402

from bench.runtime_common import extract_so, spec_of  # noqa: E402
from tests.runtime.blobs import build_case  # noqa: E402

MODELS = {
    "mlp": ("mlp", "mlp_unprefixed", 0.3),
    "convnet": ("convnet_cl", "convnet_cl_unprefixed", 1.5),
}

_TORCH_COLD = """
import json, sys, time
import torch
x = [torch.from_numpy(__import__('numpy').load(p)) for p in sys.argv[2:]]
t0 = time.perf_counter()
runner = torch._C._aoti.AOTIModelContainerRunnerCpu(sys.argv[1], 1)
t1 = time.perf_counter()
runner.run(x)
t2 = time.perf_counter()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"load_ms": (t1 - t0) * 1e3, "first_run_ms": (t2 - t1) * 1e3,
                  "max_rss_kb": hwm}))
"""


# torch's own C++ runner in a loop: the C-level baseline (no Python on either side).
# Usage: torch_runner_bench BLOB.so RUNS 4x16 [...]: float32 zero inputs.
_TORCH_CPP = r"""
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>
#include <ATen/ops/zeros.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char** argv) {
  const long runs = std::strtol(argv[2], nullptr, 10);
  std::vector<at::Tensor> inputs;
  for (int i = 3; i < argc; ++i) {
    std::vector<int64_t> sizes;
    const char* p = argv[i];
    while (*p) { char* e; sizes.push_back(std::strtoll(p, &e, 10)); p = *e == 'x' ? e + 1 : e; }
    inputs.push_back(at::zeros(sizes, at::kFloat));
  }
  torch::inductor::AOTIModelContainerRunnerCpu runner(argv[1], 1);
  runner.run(inputs);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < runs; ++i) runner.run(inputs);
  const double us = std::chrono::duration<double, std::micro>(
      std::chrono::steady_clock::now() - t0).count() / runs;
  std::printf("%.3f\n", us);
}
"""


def build_torch_cpp_bench() -> Path:
    """Compile the C++ torch-runner loop (cached under build/bench/)."""
    out_dir = ROOT / "build" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    source, binary = out_dir / "torch_runner_bench.cpp", out_dir / "torch_runner_bench"
    if not (binary.exists() and source.exists() and source.read_text() == _TORCH_CPP):
        source.write_text(_TORCH_CPP)
        tdir = Path(torch.__file__).parent
        cmd = ["g++", "-std=c++20", "-O2", f"-I{tdir / 'include'}", str(source), "-o"]
        cmd += [str(binary), f"-L{tdir / 'lib'}", "-ltorch_cpu", "-lc10", "-ltorch"]
        cmd += [f"-Wl,-rpath,{tdir / 'lib'}"]
        subprocess.run(cmd, check=True)
    return binary


def time_calls(fn: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def bench_model(
    label: str, calls: int, rounds: int, tmp: Path, runner_bin: Path, torch_bin: Path
) -> dict[str, Any]:
    prefixed_name, twin_name, target = MODELS[label]
    ours_case, twin_case = build_case(prefixed_name), build_case(twin_name)
    twin_so = extract_so(twin_case.pt2, tmp)
    ours_so = extract_so(ours_case.pt2, tmp)
    inputs = ours_case.inputs
    tensors = [torch.from_numpy(a) for a in inputs]

    ours = rt.load(ours_case.pt2)
    # The same blob called through ctypes only (SHIMKIT_FASTCALL=0): what the
    # C extension's fast call saves.
    os.environ[fastcall.FASTCALL_ENV] = "0"
    try:
        ours_ctypes = rt.load(ours_case.pt2, lint=False)
    finally:
        del os.environ[fastcall.FASTCALL_ENV]
    runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(twin_so), 1)
    # Same numbers from both, in the same process.
    diff = max(
        float(np.abs(a - b.numpy()).max())
        for a, b in zip(ours(*inputs), runner.run(tensors), strict=True)
    )

    def ours_call() -> Any:
        return ours(*inputs)

    def torch_call() -> Any:
        return runner.run(tensors)

    def ctypes_call() -> Any:
        return ours_ctypes(*inputs)

    for fn in (ours_call, torch_call, ctypes_call):
        time_calls(fn, max(calls // 10, 10))
    ours_us, torch_us, ctypes_us = [], [], []
    for _ in range(rounds):
        ours_us.append(time_calls(ours_call, calls))
        torch_us.append(time_calls(torch_call, calls))
        ctypes_us.append(time_calls(ctypes_call, calls))
    ours_calls, ours_fast = 1 + max(calls // 10, 10) + rounds * calls, ours.fast_calls
    assert ours_ctypes.fast_calls == 0
    ours_ctypes.close()
    c_loop_us = statistics.median(
        ours.bench(*inputs, iterations=calls) / 1e3 for _ in range(rounds)
    )
    ours.close()
    shapes = ["x".join(map(str, a.shape)) for a in inputs]
    torch_cmd = [str(torch_bin), str(twin_so), str(calls), *shapes]
    torch_cpp_us = statistics.median(
        float(subprocess.run(torch_cmd, capture_output=True, text=True, check=True).stdout)
        for _ in range(rounds)
    )

    cold_ours = json.loads(
        subprocess.run(
            [str(runner_bin), str(ours_so), "0", *spec_of(inputs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    npys = []
    for i, a in enumerate(inputs):
        npys.append(tmp / f"{label}_in{i}.npy")
        np.save(npys[-1], a)
    cold_torch = json.loads(
        subprocess.run(
            [sys.executable, "-c", _TORCH_COLD, str(twin_so), *map(str, npys)],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    ours_med, torch_med = statistics.median(ours_us), statistics.median(torch_us)
    return {
        "model": label,
        "max_abs_diff_vs_torch_runner": diff,
        "ours_us_per_call": ours_med,
        "torch_us_per_call": torch_med,
        "ratio": ours_med / torch_med,
        "round_ratios": [o / t for o, t in zip(ours_us, torch_us, strict=True)],
        "ours_ctypes_us_per_call": statistics.median(ctypes_us),
        "ours_calls": ours_calls,
        "ours_fast_calls": ours_fast,
        "target_ratio": target,
        "ours_c_loop_us_per_run": c_loop_us,
        "torch_cpp_us_per_run": torch_cpp_us,
        "c_ratio": c_loop_us / torch_cpp_us,
        "ours_cold_load_ms": cold_ours["load_ms"],
        "ours_cold_first_run_ms": cold_ours["first_run_ms"],
        "ours_max_rss_mb": cold_ours["max_rss_kb"] / 1024,
        "torch_cold_load_ms": cold_torch["load_ms"],
        "torch_cold_first_run_ms": cold_torch["first_run_ms"],
        "torch_max_rss_mb": cold_torch["max_rss_kb"] / 1024,
    }


def main() -> int:
    args = ARGS
    torch.set_num_threads(args.threads)
    runner_bin = build_run_blob(build())
    torch_bin = build_torch_cpp_bench()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in MODELS:
            results.append(
                bench_model(label, args.calls, args.rounds, Path(tmp), runner_bin, torch_bin)
            )
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"{args.rounds} rounds x {args.calls} calls, medians"
    )
    print(
        "| model | Python: slim / torch us per call | ratio (target) [per round] "
        "| slim via ctypes us | C: slim / torch C++ us per run | C ratio "
        "| cold load+1st run ms slim / torch | peak RSS MB slim / torch |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        ok = "met" if r["ratio"] <= r["target_ratio"] else "MISSED"
        rounds = " ".join(f"{x:.2f}" for x in r["round_ratios"])
        print(
            f"| {r['model']} | {r['ours_us_per_call']:.2f} / {r['torch_us_per_call']:.2f} | "
            f"{r['ratio']:.2f}x (<= {r['target_ratio']}x: {ok}) [{rounds}] | "
            f"{r['ours_ctypes_us_per_call']:.2f} | "
            f"{r['ours_c_loop_us_per_run']:.1f} / {r['torch_cpp_us_per_run']:.1f} | "
            f"{r['c_ratio']:.2f}x | "
            f"{r['ours_cold_load_ms'] + r['ours_cold_first_run_ms']:.1f} / "
            f"{r['torch_cold_load_ms'] + r['torch_cold_first_run_ms']:.1f} | "
            f"{r['ours_max_rss_mb']:.1f} / {r['torch_max_rss_mb']:.1f} |"
        )
    for r in results:
        print(f"{r['model']}: {r['ours_fast_calls']} of {r['ours_calls']} slim calls fast")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
