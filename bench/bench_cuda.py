"""CUDA on a GPU machine: slim runtime vs torch's CUDA runner, pinned vs pageable H2D.

    python3 bench/bench_cuda.py OUT_DIR            # run the GPU experiment, print the table
    python3 bench/bench_cuda.py --from SUMMARY.json   # print the table of a recorded run

The measurement itself is tools/gpu/cuda_experiment.py (see docs/cuda.md): the
slim figures come from a process without torch, torch's from
AOTIModelContainerRunnerCuda on the same prefixed blob through shimkit's
forwarding library; both synchronise after every call. Without a usable GPU
the script says why and exits 2.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def get(data: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary.get('date_utc', '?')} UTC, {summary.get('gpu', '?')}, {summary.get('cpu', '?')}",
        "",
        "| model | slim us/run | slim next to libtorch_cuda | torch runner us/run | ratio "
        "| matches eager | binding proof |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for case in ("mlp", "convnet"):
        slim = get(summary, "slim", case, "us_per_run")
        beside = get(summary, "probe", case, "us_per_run_next_to_libtorch")
        torch_us = get(summary, "torch_runner_forward", f"{case}_same_blob", "us_per_run")
        if torch_us is None:
            torch_us = get(summary, "torch_runner", f"{case}_same_blob", "us_per_run")
        ratio = f"{slim / torch_us:.2f}x" if slim and torch_us else "-"
        match = get(summary, "slim", case, "match")
        proof = get(summary, "probe", case, "proof_ok")
        bound = get(summary, "probe", case, "bound_to_slim")
        total = get(summary, "probe", case, "shim_imports")
        spread = (
            f" (blocks {get(summary, 'slim', case, 'us_per_run_min_max')} vs "
            f"{get(summary, 'torch_runner_forward', f'{case}_same_blob', 'us_per_run_min_max')})"
        )
        lines.append(
            f"| {case} | {slim} | {beside} | {torch_us} | {ratio}{spread} | {match} "
            f"| {proof} ({bound}/{total} imports bound to the slim library) |"
        )
    on_cudnn = get(summary, "slim", "convnet", "convs_on_cudnn")
    on_host = get(summary, "slim", "convnet", "convs_on_host")
    lines += [
        "",
        f"conv net convolutions: {on_cudnn} on cuDNN, {on_host} on the host "
        f"({get(summary, 'slim', 'cudnn')}); "
        f"cuDNN signature check: rc={get(summary, 'steps', 'cudnn_check', 'rc')}",
    ]
    for case in ("mlp", "convnet"):
        g = get(summary, "slim_graphs", case) or {}
        torch_us = get(summary, "torch_runner_forward", f"{case}_same_blob", "us_per_run")
        graph_us = g.get("us_per_run")
        ratio = f"{graph_us / torch_us:.2f}x" if graph_us and torch_us else "-"
        lines.append(
            f"{case} with CUDA-graph replay: {graph_us} us/run "
            f"(blocks {g.get('us_per_run_min_max')}), {ratio} of torch's runner; status "
            f"'{g.get('graph_status')}', replays match eager: {g.get('replay_runs_match')}, "
            f"new inputs through the replay match: {g.get('replay_new_inputs_match')} "
            f"(max diff {g.get('replay_new_inputs_max_abs_diff_vs_eager')})"
        )
    for case in ("mlp", "convnet"):
        lines.append(
            f"{case} GEMMs: {get(summary, 'slim', case, 'gemms_on_cublaslt')} on cuBLASLt, "
            f"{get(summary, 'slim', case, 'gemms_on_cublas')} on cuBLAS; without cuBLASLt and "
            f"cuDNN (SHIMKIT_CUBLASLT=0 SHIMKIT_CUDNN=0): "
            f"{get(summary, 'slim_legacy', case, 'us_per_run')} us/run"
        )
    bw = get(summary, "slim", "h2d_bandwidth") or {}
    lines += [
        "",
        f"H2D {bw.get('bytes', 0) >> 20} MiB through empty_strided_pinned: "
        f"{bw.get('pinned_gb_per_s')} GB/s pinned vs {bw.get('pageable_gb_per_s')} GB/s "
        f"pageable ({bw.get('ratio')}x)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="output directory of a new run")
    parser.add_argument("--from", dest="summary", type=Path, help="a recorded summary.json")
    args = parser.parse_args(argv)
    if args.summary is not None:
        try:
            summary = json.loads(args.summary.read_text())
        except (OSError, ValueError) as exc:
            print(f"{args.summary}: cannot read the summary: {exc}", file=sys.stderr)
            return 1
        print(table(summary))
        return 0
    if args.out is None:
        parser.error("give OUT_DIR or --from SUMMARY.json")
    probe = (
        subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if _has_smi() else None
    )
    if probe is None or probe.returncode != 0:
        print(
            "no usable GPU here (nvidia-smi missing or failing): run this on the GPU machine",
            file=sys.stderr,
        )
        return 2
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu" / "cuda_experiment.py"), str(args.out)]
    )
    if done.returncode != 0:
        return done.returncode
    print(table(json.loads((args.out / "summary.json").read_text())))
    return 0


def _has_smi() -> bool:
    from shutil import which

    return which("nvidia-smi") is not None


if __name__ == "__main__":
    sys.exit(main())
