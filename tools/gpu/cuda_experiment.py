"""The whole GPU experiment, one command on the H200 machine (see docs/cuda.md).

    python3 tools/gpu/cuda_experiment.py OUT_DIR

Every step runs in its own subprocess with a time limit (torch's runner once
segfaulted there); its output goes to OUT_DIR/logs/<step>.log and its
results to OUT_DIR/<step>.json; OUT_DIR/summary.json collects them.
Needs: python3 with torch (CUDA) and numpy, g++, and the wheels in
tools/gpu/wheels (starlark-pyo3, pyelftools), which are unpacked, not
installed.
"""

from __future__ import annotations

import concurrent.futures
import glob
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tools" / "gpu"


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


def step(
    name: str, argv: list[str], out: Path, env: dict[str, str], timeout: int
) -> dict[str, object]:
    log = out / "logs" / f"{name}.log"
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=GPU
        )
        rc: int | str = proc.returncode
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        text = f"{exc.stdout or ''}{exc.stderr or ''}"
        text = text if isinstance(text, str) else repr(text)
    log.write_text(f"$ {' '.join(argv)}\n{text}\nrc={rc}\n")
    return {"rc": rc, "seconds": round(time.perf_counter() - start, 1), "log": str(log.name)}


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/shimkit-gpu")
    blobs, build, deps = work / "blobs", work / "build", work / "pydeps"
    blobs.mkdir(parents=True, exist_ok=True)
    summary: dict[str, object] = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "python": platform.python_version(),
        "wheels": unpack_wheels(deps),
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "lint"), str(deps), str(GPU)])
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*nvidia_lib_dirs(), env.get("LD_LIBRARY_PATH", "")])
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor-cache")
    env["SHIMKIT_CONFIG"] = str(ROOT / "rules" / "shim_symbol_prefix.bzl")
    if "--reuse-blobs" in sys.argv and (GPU / "fixtures" / "blobs").is_dir():
        env["SHIMKIT_REUSE_BLOBS"] = str(GPU / "fixtures" / "blobs")
    py = sys.executable
    try:
        info = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        gpu = info.stdout.strip() or info.stderr.strip()
    except OSError as exc:
        gpu = f"no nvidia-smi: {exc}"
    summary["gpu"] = gpu
    summary["cpu"] = subprocess.run(
        ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    steps: dict[str, object] = {}
    # Build the libraries while the four models compile.
    jobs = {
        "build": [py, str(GPU / "build_cuda_libs.py"), str(build)],
        "cudnn_check": cudnn_check_argv(),
        **{
            f"compile_{case}": [py, str(GPU / "step_compile.py"), case, str(blobs)]
            for case in ("mlp", "convnet", "mlp_default")
            if case != "mlp_default" or "--no-default" not in sys.argv
        },
    }
    # The wrong-device control: a prefixed CPU blob (tools/gpu/fixtures, from
    # the CPU tests' cache) unless a CPU compile is asked for.
    fixture = GPU / "fixtures" / "mlp_cpu.so"
    if fixture.exists() and "--compile-cpu" not in sys.argv:
        (blobs / "mlp_cpu.so").write_bytes(fixture.read_bytes())
    else:
        jobs["compile_mlp_cpu"] = [py, str(GPU / "step_compile.py"), "mlp_cpu", str(blobs)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {
            name: pool.submit(step, name, argv, out, env, 150) for name, argv in jobs.items()
        }
        for name, fut in futures.items():
            steps[name] = fut.result()

    def gpu_step(
        name: str, script: str, flags: list[str], limit: int, extra_env: dict[str, str]
    ) -> None:
        """One step script on the built libraries and blobs, its JSON in OUT_DIR/<name>.json."""
        argv = [py, script, str(build), str(blobs), str(out / f"{name}.json"), *flags]
        steps[name] = step(name, argv, out, dict(env, **extra_env), limit)

    gpu_step("slim", "step_slim.py", [], 45, {})
    gpu_step("breakdown", "step_breakdown.py", [], 90, {})
    # With CUDA-graph replay: correctness of capture and replay, then latency.
    gpu_step("slim_graphs", "step_slim.py", ["--graphs", "--no-controls"], 60, {})
    # Without cuDNN and cuBLASLt (host convolution, legacy cuBLAS), for comparison.
    gpu_step(
        "slim_legacy", "step_slim.py", ["--bench-only"], 45,
        {"SHIMKIT_CUDNN": "0", "SHIMKIT_CUBLASLT": "0"},
    )  # fmt: skip
    if "--no-nocache" not in sys.argv:
        no_cache = {"SHIMKIT_CUDA_CACHING": "0"}
        gpu_step("slim_nocache", "step_slim.py", ["--bench-only"], 40, no_cache)
    gpu_step("probe", "step_probe.py", [], 70, {})
    for mode in ("forward", "default"):
        steps[f"torch_runner_{mode}"] = step(
            f"torch_runner_{mode}",
            [py, "step_torch_runner.py", str(blobs), str(out / f"torch_runner_{mode}.json"), mode],
            out,
            env,
            40,
        )
    for name in ("mlp", "convnet"):
        if (blobs / f"{name}.so").exists():
            (out / f"{name}.so").write_bytes((blobs / f"{name}.so").read_bytes())
    summary["steps"] = steps
    results = ("slim", "slim_graphs", "slim_legacy", "slim_nocache", "probe", "breakdown")
    for name in (*results, "torch_runner_forward", "torch_runner_default"):
        path = out / f"{name}.json"
        if path.exists():
            summary[name] = json.loads(path.read_text())
    for case in ("mlp", "convnet", "mlp_default", "mlp_cpu"):
        path = blobs / f"compile_{case}.json"
        if path.exists():
            (out / path.name).write_text(path.read_text())
            data = json.loads(path.read_text())
            summary[f"compile_{case}"] = {
                "seconds": data["compile_seconds"],
                "problems": data["problems"],
                "shim_imports": [len(b["shim_imports"]) for b in data["blobs"].values()],
                "needed": [b["needed"] for b in data["blobs"].values()],
            }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
