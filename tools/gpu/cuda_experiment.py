"""The whole GPU experiment, one command on the H200 machine (see docs/cuda.md).

    python3 tools/gpu/cuda_experiment.py OUT_DIR [--budget SECONDS] [--models a,b,...]
                                                 [--reuse-blobs DIR] [--rounds N]
                                                 [--tf32-rounds N] [--baseline-tree DIR]
                                                 [--zoo [a,b,...]] [--zoo-timed a,b,...]
                                                 [--random]

For ResNet-18, MobileNetV3-small, a 2-layer BERT, an LSTM, an MLP, a GPT-2-like decoder
and a TransformerEncoder (tools/gpu/cuda_models.py) it measures, in one run and on the
same prefixed blob: the slim CUDA runtime eager, the slim runtime replaying CUDA graphs,
and torch's AOTIModelContainerRunnerCuda (through the forwarding library), each side
with its math named. Stages: build the slim libraries while every model compiles (in
parallel); then, one model at a time on a quiet machine, the slim step and torch's
step; then the device time per run of ResNet-18 and BERT on both sides (torch's
profiler), the convolution models with cuDNN's first-ranked engines untimed (for
comparison), the per-call breakdown and the binding proof next to libtorch_cuda; last,
budget permitting, a float16 conv net and a model of the ops beside attention. Between
the two, --rounds N (default 3) interleaved rounds of the issue's replay target: per
round and model, the slim replay at torch's default math (TF32 convolutions) and torch's
runner, one after the other, the order alternating between rounds, each in a fresh
process; the ratio is taken per round (torch's host time moves between processes and
runs, so a single pair of figures can land either side of a target). --tf32-rounds N adds
N such rounds with TF32 allowed in float32 matmuls too, on both sides (the slim runtime's
`matmul_tf32`, torch's `cuda.matmul.allow_tf32`). --baseline-tree DIR
builds the slim libraries of another checkout too and runs them in the same rounds (an
A/B of a change, same machine, same blobs). Every step runs in its own subprocess with a
time limit, so a failing or crashing model never stops the others; steps that would start
after --budget seconds (default 470) are skipped and listed.
Logs: OUT_DIR/logs/<step>.log; results: OUT_DIR/<step>.json; OUT_DIR/summary.json
collects them with a table per model. Needs python3 with a CUDA torch and numpy, g++,
and the wheels in tools/gpu/wheels (starlark-pyo3), which are unpacked, not installed.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import glob
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tools" / "gpu"
sys.path.insert(0, str(GPU))

from cuda_models import CONV_MODELS, EXTRA_MODELS, ISSUE_MODELS, MODELS  # noqa: E402

# Models whose device time per run is profiled on both sides (the replay targets' floor).
PROFILED_MODELS = ("resnet18", "bert2")

COMPILE_LIMIT = 330
SLIM_LIMIT = 120
TORCH_LIMIT = 150


def nvidia_lib_dirs() -> list[str]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return []
    site = Path(next(iter(spec.submodule_search_locations))).parent
    dirs = {
        str(Path(p).parent)
        for p in glob.glob(str(site / "nvidia" / "**" / "lib*.so*"), recursive=True)
    }
    dirs.add(str(site / "torch" / "lib"))
    return sorted(dirs)


def cudnn_check_argv() -> list[str]:
    """g++ on tests/cuda/cudnn_signature_check.cpp with torch's cuDNN and CUDA headers."""
    includes = ["-I", str(ROOT)]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        site = Path(next(iter(spec.submodule_search_locations))).parent
        for header in ("cudnn.h", "cuda_runtime_api.h"):
            for found in sorted(glob.glob(str(site / "nvidia" / "**" / header), recursive=True)):
                includes += ["-I", str(Path(found).parent)]
    includes += ["-I", "/usr/local/cuda/include"]
    check = ROOT / "tests" / "cuda" / "cudnn_signature_check.cpp"
    return ["g++", "-std=c++17", "-fsyntax-only", "-Wall", *includes, str(check)]


def unpack_wheels(target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    names = []
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for wheel in sorted((GPU / "wheels").glob("*.whl")):
        if "-py3-none-" not in wheel.name and f"-{tag}-" not in wheel.name:
            continue  # built for another Python
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
        names.append(wheel.name)
    return names


class Experiment:
    def __init__(self, out: Path, budget: float, env: dict[str, str]) -> None:
        self.out = out
        self.deadline = time.monotonic() + budget
        self.env = env
        self.steps: dict[str, dict[str, object]] = {}

    def step(
        self, name: str, argv: list[str], limit: int, extra_env: dict[str, str] | None = None
    ) -> dict[str, object]:
        """Runs one step in a subprocess (its log in logs/<name>.log); skipped once the
        budget is spent, and cut at whatever of its limit the budget leaves."""
        remaining = self.deadline - time.monotonic()
        if remaining < 15:
            result: dict[str, object] = {"rc": "skipped (time budget)"}
            self.steps[name] = result
            return result
        log = self.out / "logs" / f"{name}.log"
        env = dict(self.env, **(extra_env or {}))
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                argv, env=env, capture_output=True, text=True, cwd=GPU,
                timeout=min(limit, remaining),
            )  # fmt: skip
            rc: int | str = proc.returncode
            text = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = "timeout"
            text = f"{exc.stdout or ''}{exc.stderr or ''}"
            text = text if isinstance(text, str) else repr(text)
        log.write_text(f"$ {' '.join(argv)}\n{text}\nrc={rc}\n")
        result = {"rc": rc, "seconds": round(time.perf_counter() - start, 1)}
        if rc != 0:
            result["log_tail"] = text.strip().splitlines()[-3:]
        self.steps[name] = result
        return result

    def result(self, name: str) -> Any:
        path = self.out / f"{name}.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None


def get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def ratio(a: Any, b: Any) -> float | None:
    return (
        round(a / b, 2)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b
        else None
    )


def model_table(exp: Experiment, models: list[str]) -> dict[str, dict[str, object]]:
    table: dict[str, dict[str, object]] = {}
    for name in models:
        slim, torch_side = exp.result(f"slim_{name}"), exp.result(f"torch_{name}")
        compiled = exp.result(f"compile_{name}")
        untimed = exp.result(f"slim_untimed_{name}")
        eager = get(slim, "eager", "us_per_run")
        replay = get(slim, "replay", "us_per_run")
        torch_default = get(torch_side, "default_math", "us_per_run")
        torch_fp32 = get(torch_side, "float32", "us_per_run")
        tf32 = get(slim, "eager_tf32", "us_per_run")
        replay_tf32 = get(slim, "replay_tf32", "us_per_run")
        table[name] = {
            "slim_eager_us": eager,
            "slim_replay_us": replay,
            "torch_runner_us": torch_default,
            "eager_vs_torch": ratio(eager, torch_default),
            "replay_vs_torch": ratio(replay, torch_default),
            "slim_eager_tf32_us": tf32,
            "eager_tf32_vs_torch": ratio(tf32, torch_default),
            "slim_replay_tf32_us": replay_tf32,
            "replay_tf32_vs_torch": ratio(replay_tf32, torch_default),
            "replay_tf32_matches": get(slim, "replay_tf32", "runs_match"),
            "torch_runner_float32_us": torch_fp32,
            "eager_vs_torch_float32": ratio(eager, torch_fp32),
            "slim_eager_untimed_engines_us": get(untimed, "eager", "us_per_run"),
            "math": {
                "slim": get(slim, "eager", "math"),
                "slim_tf32": get(slim, "eager_tf32", "math"),
                "torch": get(torch_side, "default_math", "math"),
            },
            "slim_matches_eager": get(slim, "eager", "match"),
            "replay_matches": get(slim, "replay", "runs_match"),
            "replay_new_inputs_match_eager": get(slim, "replay", "new_inputs_match_eager"),
            "graph_status": get(slim, "replay", "graph_status_after"),
            "torch_matches_eager": get(torch_side, "float32", "match"),
            "calls_per_eager_run": get(slim, "eager", "calls_per_run"),
            "math_form": get(compiled, "math_form"),
            "closure_error": get(compiled, "closure_error"),
            "lint_error": get(slim, "eager", "lint_error"),
            "errors": {
                step: exp.steps[step]
                for step in (f"compile_{name}", f"slim_{name}", f"torch_{name}")
                if step in exp.steps and exp.steps[step].get("rc") != 0
            },
        }
    return table


def zoo_models() -> list[str]:
    """The CPU test suite's model names (tests/models/zoo.py's SUITE), read without torch."""

    source = (ROOT / "tests" / "models" / "zoo.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "ZOO":
            names = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            return names[: names.index("resnet18")]
    raise SystemExit("tests/models/zoo.py: no ZOO table")


def zoo_verdict(result: dict[str, Any]) -> str | None:
    """One line: the slim runtime against eager and against torch's runner on the same blob."""
    if "match" not in result:
        return None
    if result["match"]:
        return "matches eager"
    if result.get("slim_matches_peer") and not result.get("peer_matches_eager"):
        return (
            "differs from eager, and torch's runner on the same blob gives the same outputs: "
            "the blob's (Inductor's) difference, not the slim runtime's"
        )
    if "peer_error" in result:
        return f"differs from eager; torch's runner not compared ({result['peer_error']})"
    return "differs from eager and from torch's runner on the same blob: the slim runtime's"


def zoo_row(exp: Experiment, name: str) -> dict[str, object]:
    result = exp.result(f"zoo_{name}") or {}
    return {
        "match": result.get("match"),
        "verdict": zoo_verdict(result),
        "peer_matches_eager": result.get("peer_matches_eager"),
        "slim_matches_peer": result.get("slim_matches_peer"),
        "shape_warnings": result.get("shape_warnings"),
        "runs": [
            (r.get("input_shapes"), r.get("match"), r.get("max_rel_diff"))
            for r in result.get("runs", [])
        ],
        # Which outputs differ, where any does (True, False or a difference per output).
        "outputs_of_differing_runs": [
            r.get("outputs") for r in result.get("runs", []) if not r.get("match")
        ],
        "math_form": result.get("math_form"),
        "conv_on_cudnn_host": result.get("conv_on_cudnn_host"),
        "timing": result.get("timing"),
        "closure_error": result.get("closure_error"),
        "peer_error": result.get("peer_error"),
        "step": exp.steps.get(f"zoo_{name}"),
    }


def interleaved(
    exp: Experiment, models: list[str], rounds: int, sides: list[str], prefix: str = "round"
) -> dict[str, Any]:
    """Per model: each side's figure per round, the slim/torch ratio per round, its median."""
    table: dict[str, Any] = {}
    for name in models:
        row: dict[str, Any] = {}
        for side in sides:
            key = "default_math" if side == "torch" else "replay"
            row[f"{side}_us"] = [get(exp.result(f"{prefix}{r}_{side}_{name}"), key, "us_per_run")
                                 for r in range(rounds)]  # fmt: skip
        if rounds:
            row["math"] = {side: get(exp.result(f"{prefix}0_{side}_{name}"),
                                     "default_math" if side == "torch" else "replay", "math")
                           for side in sides}  # fmt: skip
        row["replays_match"] = [
            get(exp.result(f"{prefix}{r}_{side}_{name}"), "replay", "runs_match")
            for r in range(rounds)
            for side in sides
            if side != "torch"
        ]
        for side in (s for s in sides if s != "torch"):
            ratios = [ratio(a, b) for a, b in zip(row[f"{side}_us"], row["torch_us"], strict=True)]
            known = [x for x in ratios if x is not None]
            row[f"{side}_vs_torch"] = ratios
            row[f"{side}_vs_torch_median"] = statistics.median(known) if known else None
        table[name] = row
    return table


def targets(table: dict[str, dict[str, object]]) -> dict[str, object]:
    """Issue 11's CUDA targets, as measured in this run."""
    eager = {m: table[m]["eager_vs_torch"] for m in CONV_MODELS if m in table}
    # Each model at the math torch's default uses (TF32 convolutions where it has any).
    replay = {
        m: table[m]["replay_tf32_vs_torch"] or table[m]["replay_vs_torch"]
        for m in ISSUE_MODELS
        if m in table
    }
    return {
        "eager_conv_models_at_most_1.0x": eager,
        "eager_met": all(isinstance(v, float) and v <= 1.0 for v in eager.values()) or None,
        "replay_issue_models_at_most_0.5x": replay,
        "replay_met": all(isinstance(v, float) and v <= 0.5 for v in replay.values()) or None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=float, default=470.0, help="seconds (default 470)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--reuse-blobs", type=Path, help="MODEL.so + MODEL.npz of an earlier run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--tf32-rounds",
        type=int,
        default=0,
        help="interleaved rounds with TF32 in float32 matmuls too, both sides (default 0)",
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="another checkout whose slim libraries also run in the interleaved rounds",
    )
    parser.add_argument(
        "--zoo",
        nargs="?",
        const="all",
        metavar="a,b,...",
        help="also compile and run the CPU test suite's models (tests/models/zoo.py) on CUDA: "
        "all of them, or those named",
    )
    parser.add_argument(
        "--zoo-timed",
        default="",
        metavar="a,b,...",
        help="zoo models also run with CUDA-graph replay and timed against torch's runner, "
        "one at a time on a quiet machine (after the issue's models)",
    )
    parser.add_argument(
        "--model-files",
        type=Path,
        metavar="DIR",
        help="also compile every *.py model file in DIR with `shimkit compile --device cuda` "
        "and run it on the slim CUDA runtime with graph replay, against eager "
        "(step_model_file.py: held-out models, kept outside the repository)",
    )
    parser.add_argument(
        "--random",
        action="store_true",
        help="also compile and run random ops and torch.multinomial on CUDA (step_random.py)",
    )
    args = parser.parse_args()
    out = args.out.resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    work = Path("/tmp/shimkit-gpu")
    blobs, build, deps = work / "blobs", work / "build", work / "pydeps"
    blobs.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "python": platform.python_version(),
        "wheels": unpack_wheels(deps),
        "models": models,
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "lint"), str(deps), str(GPU)])
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*nvidia_lib_dirs(), env.get("LD_LIBRARY_PATH", "")])
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor-cache")
    env["SHIMKIT_CONFIG"] = str(ROOT / "rules" / "shim_symbol_prefix.bzl")
    env["SHIMKIT_LIB_DIR"] = str(build)
    exp = Experiment(out, args.budget, env)
    try:
        info = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True,
        )  # fmt: skip
        summary["gpu"] = info.stdout.strip() or info.stderr.strip()
    except OSError as exc:
        summary["gpu"] = f"no nvidia-smi: {exc}"
    summary["cpu"] = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    py = sys.executable
    # Stage 1: the libraries first (every compile checks its blob against their exports,
    # through $SHIMKIT_LIB_DIR), then the cuDNN check and every model's blob in parallel.
    exp.step("build", [py, str(GPU / "build_cuda_libs.py"), str(build)], 150)
    baseline = work / "build-baseline"
    if args.baseline_tree:
        tree = args.baseline_tree.resolve()
        exp.step("build_baseline", [py, str(tree / "tools" / "gpu" / "build_cuda_libs.py"),
                 str(baseline)], 150)  # fmt: skip
    jobs: dict[str, tuple[list[str], dict[str, str]]] = {"cudnn_check": (cudnn_check_argv(), {})}
    compile_env = {"TORCHINDUCTOR_COMPILE_THREADS": "2"}
    for name in [*models, "mlp_cpu"]:
        reused = args.reuse_blobs and (args.reuse_blobs / f"{name}.so").exists()
        if reused and (args.reuse_blobs / f"{name}.npz").exists():
            for suffix in (".so", ".npz"):
                shutil.copyfile(args.reuse_blobs / f"{name}{suffix}", blobs / f"{name}{suffix}")
            continue
        jobs[f"compile_{name}"] = (
            [py, str(GPU / "step_compile.py"), name, str(blobs)],
            compile_env,
        )
    zoo = zoo_models() if args.zoo == "all" else [m for m in (args.zoo or "").split(",") if m]
    zoo_timed = [m for m in args.zoo_timed.split(",") if m]
    zoo += [m for m in zoo_timed if m not in zoo]
    for name in (m for m in zoo if m not in zoo_timed):
        # Correctness only: they may share the machine with the compiles.
        jobs[f"zoo_{name}"] = (
            [py, str(GPU / "step_zoo.py"), str(out / f"zoo_{name}.json"), name, str(blobs)],
            compile_env,
        )
    model_files = sorted(args.model_files.resolve().glob("*.py")) if args.model_files else []
    for path in model_files:
        jobs[f"file_{path.stem}"] = (
            [py, str(GPU / "step_model_file.py"), str(out / f"file_{path.stem}.json"),
             str(path), str(blobs)],
            compile_env,
        )  # fmt: skip
    if args.random:
        jobs["random"] = (
            [py, str(GPU / "step_random.py"), str(out / "random.json"), str(blobs)],
            compile_env,
        )
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [
            pool.submit(exp.step, n, argv, COMPILE_LIMIT, e) for n, (argv, e) in jobs.items()
        ]
        concurrent.futures.wait(futures)
    for path in blobs.glob("compile_*.json"):
        shutil.copyfile(path, out / path.name)

    def measure(name: str) -> None:
        """The slim step, then torch's, for one model."""
        flags = ["--controls"] if name == "mlp" else []
        exp.step(f"slim_{name}", [py, "step_slim.py", str(build), str(blobs),
                 str(out / f"slim_{name}.json"), name, *flags], SLIM_LIMIT)  # fmt: skip
        exp.step(f"torch_{name}", [py, "step_torch_runner.py", str(blobs),
                 str(out / f"torch_{name}.json"), name], TORCH_LIMIT)  # fmt: skip

    # Stage 2: the issue's models, one at a time on a quiet machine.
    main_models = [m for m in models if m not in EXTRA_MODELS]
    for name in main_models:
        measure(name)
    for name in zoo_timed:
        exp.step(f"zoo_{name}", [py, str(GPU / "step_zoo.py"), str(out / f"zoo_{name}.json"),
                 name, str(blobs), "--timed"], COMPILE_LIMIT, compile_env)  # fmt: skip
    # Stage 2b: interleaved rounds of the replay target (torch's default math on both sides),
    # then, with --tf32-rounds, rounds with TF32 in the float32 GEMMs too, on both sides.
    sides = ["slim", "torch", *(["baseline"] if args.baseline_tree else [])]
    round_models = [m for m in ISSUE_MODELS if m in models]

    def run_rounds(prefix: str, rounds: int, tf32_matmul: bool) -> None:
        matmul = ["--tf32-matmul"] if tf32_matmul else []
        for r in range(rounds):
            for name in round_models:
                tf32 = ["--tf32"] if name in CONV_MODELS else []
                for side in sides if r % 2 == 0 else sides[::-1]:
                    json_out = str(out / f"{prefix}{r}_{side}_{name}.json")
                    if side == "torch":
                        argv = [py, "step_torch_runner.py", str(blobs), json_out, name,
                                "--default-only", *matmul]  # fmt: skip
                    else:
                        lib = build if side == "slim" else baseline
                        argv = [py, "step_slim.py", str(lib), str(blobs), json_out, name,
                                "--replay-only", *tf32, *matmul]  # fmt: skip
                    exp.step(f"{prefix}{r}_{side}_{name}", argv, TORCH_LIMIT)

    run_rounds("round", args.rounds, False)
    run_rounds("tf32round", args.tf32_rounds, True)
    # Stage 3: the diagnosis (device time per run on each side, cuDNN's first-ranked
    # engines untimed, per-call costs), the proofs.
    for name in (m for m in PROFILED_MODELS if m in models):
        tf32 = ["--tf32"] if name in CONV_MODELS else []
        for side in ("slim", "torch"):
            exp.step(f"profile_{side}_{name}", [py, "step_profile.py", str(build), str(blobs),
                     str(out / f"profile_{side}_{name}.json"), name, side, *tf32],
                     TORCH_LIMIT)  # fmt: skip
        if args.baseline_tree:  # the baseline's kernels, for the A/B
            exp.step(f"profile_baseline_{name}", [py, "step_profile.py", str(baseline),
                     str(blobs), str(out / f"profile_baseline_{name}.json"), name, "slim",
                     *tf32], TORCH_LIMIT)  # fmt: skip
    for name in (m for m in CONV_MODELS if m in models):
        exp.step(f"slim_untimed_{name}", [py, "step_slim.py", str(build), str(blobs),
                 str(out / f"slim_untimed_{name}.json"), name, "--bench-only"], SLIM_LIMIT,
                 {"SHIMKIT_CUDNN_AUTOTUNE": "0"})  # fmt: skip
    exp.step("breakdown", [py, "step_breakdown.py", str(build), str(blobs),
             str(out / "breakdown.json")], 90)  # fmt: skip
    exp.step("breakdown_legacy", [py, "step_breakdown.py", str(build), str(blobs),
             str(out / "breakdown_legacy.json"), "--no-model"], 90,
             {"SHIMKIT_CUDNN_API": "legacy"})  # fmt: skip
    probed = [m for m in ("mlp", "resnet18", "bert2") if m in models]
    exp.step("probe", [py, "step_probe.py", str(blobs), str(out / "probe.json"), *probed], 120)
    # Stage 4: the extra coverage models, budget permitting.
    for name in (m for m in models if m in EXTRA_MODELS):
        measure(name)
    for name in models:
        if (blobs / f"{name}.so").exists():
            shutil.copyfile(blobs / f"{name}.so", out / f"{name}.so")
    summary["steps"] = exp.steps
    summary["table"] = model_table(exp, models)
    summary["targets"] = targets(summary["table"])
    summary["interleaved"] = interleaved(exp, round_models, args.rounds, sides)
    if args.tf32_rounds:
        summary["interleaved_tf32_matmuls"] = interleaved(
            exp, round_models, args.tf32_rounds, sides, "tf32round"
        )
    for name in ("probe", "breakdown", "breakdown_legacy"):
        summary[name] = exp.result(name)
    summary["profiles"] = {
        f"{side}_{name}": exp.result(f"profile_{side}_{name}")
        for name in PROFILED_MODELS
        for side in ("slim", "torch", "baseline")
        if name in models and exp.result(f"profile_{side}_{name}") is not None
    }
    summary["controls"] = get(exp.result("slim_mlp"), "controls")
    summary["zoo"] = {name: zoo_row(exp, name) for name in zoo}
    summary["model_files"] = {
        path.stem: {
            "result": exp.result(f"file_{path.stem}"),
            "step": exp.steps.get(f"file_{path.stem}"),
        }
        for path in model_files
    }
    summary["cudnn_check"] = exp.steps.get("cudnn_check")
    if args.random:
        summary["random"] = {"result": exp.result("random"), "step": exp.steps.get("random")}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    printed = (
        "table", "targets", "interleaved", "interleaved_tf32_matmuls", "zoo", "model_files",
        "random",
    )  # fmt: skip
    print(json.dumps({k: summary[k] for k in printed if k in summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
