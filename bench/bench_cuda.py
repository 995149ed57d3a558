"""CUDA on a GPU machine: the slim runtime (eager and CUDA-graph replay) vs torch's runner.

    python3 bench/bench_cuda.py OUT_DIR            # run the GPU experiment, print the table
    python3 bench/bench_cuda.py --from SUMMARY.json   # print the table of a recorded run

The measurement itself is tools/gpu/cuda_experiment.py (see docs/cuda.md): per model,
the slim figures come from a process without torch, torch's from
AOTIModelContainerRunnerCuda on the same prefixed blob through shimkit's forwarding
library, in the same run; both synchronise after every call. Ratios are slim / torch
with torch's default math (TF32 in cuDNN convolutions); the slim runtime's default is
true float32, and its TF32 figure is torch's math. Without a usable GPU the script says
why and exits 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cell(value: Any, suffix: str = "") -> str:
    return "-" if value is None else f"{value}{suffix}"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary.get('date_utc', '?')} UTC, {summary.get('gpu', '?')}, {summary.get('cpu', '?')}",
        "",
        "| model | slim eager (fp32) | slim eager TF32 | slim replay (fp32) | slim replay TF32 "
        "| torch runner (TF32 conv) | torch runner fp32 | eager / torch | eager TF32 / torch "
        "| replay / torch | replay TF32 / torch | matches eager | replay checks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, row in (summary.get("table") or {}).items():
        checks = (
            f"{row.get('replay_matches')}, new inputs {row.get('replay_new_inputs_match_eager')}"
        )
        lines.append(
            f"| {name} | {_cell(row.get('slim_eager_us'), ' us')} "
            f"| {_cell(row.get('slim_eager_tf32_us'), ' us')} "
            f"| {_cell(row.get('slim_replay_us'), ' us')} "
            f"| {_cell(row.get('slim_replay_tf32_us'), ' us')} "
            f"| {_cell(row.get('torch_runner_us'), ' us')} "
            f"| {_cell(row.get('torch_runner_float32_us'), ' us')} "
            f"| {_cell(row.get('eager_vs_torch'), 'x')} "
            f"| {_cell(row.get('eager_tf32_vs_torch'), 'x')} "
            f"| {_cell(row.get('replay_vs_torch'), 'x')} "
            f"| {_cell(row.get('replay_tf32_vs_torch'), 'x')} "
            f"| {row.get('slim_matches_eager')} | {checks} |"
        )
    lines += ["", f"targets: {json.dumps(summary.get('targets'))}"]
    rounds = {
        "interleaved rounds, torch's default math": summary.get("interleaved"),
        "interleaved rounds, TF32 matmuls on both sides": summary.get("interleaved_tf32_matmuls"),
    }
    for title, table_rows in rounds.items():
        if table_rows:
            lines += ["", f"{title}: slim replay us / torch runner us per round, median ratio"]
            for name, row in table_rows.items():
                lines.append(
                    f"- {name}: {row.get('slim_us')} / {row.get('torch_us')}, "
                    f"{_cell(_rounded(row.get('slim_vs_torch_median')), 'x')} "
                    f"(math: {row.get('math')})"
                )
    rounds = summary.get("interleaved") or {}
    for key, profile in (summary.get("profiles") or {}).items():
        if profile:
            lines.append(
                f"device time per run, {key}: {profile.get('kernel_us_per_run')} us in kernels "
                f"({profile.get('kernels_per_run')} of them), {profile.get('device_us_per_run')} "
                "us with copies"
            )
            torch_us = (rounds.get(profile.get("model")) or {}).get("torch_us")
            if profile.get("side") == "slim" and torch_us and profile.get("device_us_per_run"):
                # A replay cannot take less than its kernels: the lowest ratio these kernels allow.
                floor = profile["device_us_per_run"] / statistics.median(torch_us)
                lines.append(
                    f"  the floor for {profile['model']}'s replay with these kernels: "
                    f"{floor:.2f}x torch's runner (its median over the rounds at torch's math)"
                )
    for name, row in (summary.get("table") or {}).items():
        problems = {k: row[k] for k in ("closure_error", "lint_error", "errors") if row.get(k)}
        if problems:
            lines.append(f"{name}: {json.dumps(problems)[:400]}")
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
