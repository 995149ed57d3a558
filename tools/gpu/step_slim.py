"""GPU experiment step: one model's prefixed CUDA blob on the slim CUDA runtime.

No torch in this process: numpy, ctypes and the slim libraries, through the package
(`shimkit.runtime.cuda`). In order, each stage's result saved as soon as it exists:
- eager: the in-process linter, load, outputs against the fp32 eager reference,
  latency (median of five blocks, synchronised after every run, inputs on the GPU);
- replay (CUDA graphs): runs 2-4 against the reference, new input values through the
  replay against an eager run of them (the captured buffers really refill), latency;
- for models with convolutions, torch's default math: eager and replay with TF32
  allowed in cuDNN;
- which library ran every convolution (cuDNN graph API, legacy API, host) and GEMM.

With --replay-only, only the replay (TF32 in convolutions with --tf32, torch's default
math; in float32 GEMMs too with --tf32-matmul): loaded, checked against the reference,
timed; what the interleaved rounds of cuda_experiment.py run next to torch's runner.

    python3 step_slim.py BUILD_DIR BLOB_DIR OUT_JSON MODEL [--bench-only] [--controls]
                         [--replay-only [--tf32] [--tf32-matmul]]
"""

from __future__ import annotations

import faulthandler
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from shimkit.errors import ShimkitError
from shimkit.runtime.blob import BlobSource
from shimkit.runtime.build import CUDA_RUNTIME_LIB, CUDA_SHIMS_LIB, RuntimeLibs
from shimkit.runtime.cuda import CudaModel, CudaRuntime, CudaRuntimeError, cuda_runtime

BLOCK_SECONDS = 0.25  # each of the five timed blocks


# TF32 keeps 10 mantissa bits: results move by ~1e-3 relative (torch's own runner with
# its default TF32 convolutions is as far from the float32 reference).
TF32_TOLERANCE = 5e-3


def compare(
    got: list[np.ndarray], expected: list[np.ndarray], tolerance: float | None = None
) -> dict[str, object]:
    """Match within `tolerance` (default 1e-4) of the reference's scale (fp32 sums in
    another order; 1e-2 for float16 results)."""
    if len(got) != len(expected) or any(
        g.shape != e.shape for g, e in zip(got, expected, strict=True)
    ):
        return {"match": False, "shapes": [list(g.shape) for g in got]}
    diffs = [float(np.max(np.abs(g.astype(np.float64) - e))) if g.size else 0.0
             for g, e in zip(got, expected, strict=True)]  # fmt: skip
    scale = max(1.0, *(float(np.max(np.abs(e))) for e in expected if e.size))
    # float16 results carry ~3 decimal digits: compare at that precision.
    if tolerance is None:
        tolerance = 1e-2 if any(e.dtype == np.float16 for e in expected) else 1e-4
    return {"match": max(diffs) <= tolerance * scale, "max_abs_diff": max(diffs), "scale": scale}


def timed(model: CudaModel, inputs: list[np.ndarray]) -> dict[str, object]:
    """Five blocks sized to ~BLOCK_SECONDS each; the median block is the figure."""
    model.bench(*inputs, iterations=3)
    probe_ns = model.bench(*inputs, iterations=5)
    n = max(5, min(5000, int(BLOCK_SECONDS / max(probe_ns * 1e-9, 1e-7))))
    blocks = [model.bench(*inputs, iterations=n) / 1e3 for _ in range(5)]
    return {
        "us_per_run": round(statistics.median(blocks), 2),
        "us_per_run_min_max": [round(min(blocks), 2), round(max(blocks), 2)],
        "runs_per_block": n,
    }


def perturbed(inputs: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """New input values of the same geometry (token ids stay in range)."""
    rng = np.random.default_rng(seed)
    out = []
    for x in inputs:
        if x.dtype.kind == "f":
            out.append((x * 0.5 + 0.25).astype(x.dtype))
        else:
            out.append(rng.integers(0, max(int(x.max()), 1), size=x.shape).astype(x.dtype))
    return out


def load(rt: CudaRuntime, source: BlobSource, entry: dict[str, Any], graphs: bool) -> CudaModel:
    """Linted first; a lint error is recorded and the blob loaded anyway, to be measured."""
    try:
        return CudaModel(source, 0, graphs=graphs, runtime=rt)
    except ShimkitError as exc:
        if "rejected by the linter" not in str(exc):
            raise
        entry["lint_error"] = str(exc)
        return CudaModel(source, 0, graphs=graphs, lint=False, runtime=rt)


def counts(rt: CudaRuntime) -> dict[str, int]:
    (cudnn, host), (graph_api, plans), (lt, legacy) = (
        rt.conv_counts(), rt.conv_api_counts(), rt.gemm_counts(),
    )  # fmt: skip
    return {
        "convs_on_cudnn": cudnn,
        "convs_on_host": host,
        "convs_on_graph_api": graph_api,
        "cudnn_plans_built": plans,
        "gemms_on_cublaslt": lt,
        "gemms_on_cublas": legacy,
    }


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def expect_error(
    rt: CudaRuntime, path: Path, data: bytes, device: int, status: str
) -> dict[str, object]:
    try:
        CudaModel(BlobSource(path, None, data), device, lint=False, runtime=rt).close()
    except CudaRuntimeError as exc:
        return {"ok": exc.status == status, "got": str(exc)}
    return {"ok": False, "got": "loaded"}


def controls(rt: CudaRuntime, blobs: Path) -> dict[str, object]:
    """Bad input on the GPU: refused before anything is loaded, with the status named."""
    r: dict[str, object] = {}
    mlp = blobs / "mlp.so"
    if mlp.exists():
        data = mlp.read_bytes()
        r["device_index_out_of_range"] = expect_error(rt, mlp, data, 7, "SHIMKIT_E_DEVICE")
        r["negative_device_index"] = expect_error(rt, mlp, data, -1, "SHIMKIT_E_DEVICE")
        r["truncated_blob"] = expect_error(rt, mlp, data[:4096], 0, "SHIMKIT_E_BAD_BLOB")
    cpu = blobs / "mlp_cpu.so"
    if cpu.exists():
        r["cpu_blob_on_cuda"] = expect_error(rt, cpu, cpu.read_bytes(), 0, "SHIMKIT_E_DEVICE")
    for label, pinned in (("pinned", True), ("pageable", False)):
        try:
            r[f"h2d_{label}_gb_per_s"] = round(rt.h2d_bandwidth(256 << 20, pinned), 2)
        except CudaRuntimeError as exc:
            r[f"h2d_{label}_error"] = str(exc)
    return r


def replay_only(
    rt: CudaRuntime,
    source: BlobSource,
    inputs: list[np.ndarray],
    expected: list[np.ndarray],
    tf32: bool,
    tf32_matmul: bool = False,
) -> dict[str, Any]:
    """Replay alone: checked on three runs, then timed (at TF32's precision with `tf32`,
    TF32 in cuDNN convolutions, or `tf32_matmul`, TF32 in float32 GEMMs)."""
    rt.cudnn_tf32 = tf32
    rt.matmul_tf32 = tf32_matmul
    entry: dict[str, Any] = {"math": rt.math}
    graphs = load(rt, source, entry, graphs=True)
    tolerance = TF32_TOLERANCE if tf32 or tf32_matmul else None
    entry["runs_match"] = [compare(graphs(*inputs), expected, tolerance)["match"]
                           for _ in range(3)]  # fmt: skip
    entry.update(timed(graphs, inputs))
    entry["graph_status_after"] = graphs.graph_status
    graphs.close()
    return entry


def main() -> int:
    faulthandler.enable()
    build, blobs, out, name = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    bench_only = "--bench-only" in sys.argv
    rt = cuda_runtime(RuntimeLibs(build / CUDA_SHIMS_LIB, build / CUDA_RUNTIME_LIB))
    report: dict[str, Any] = {"model": name, "devices": rt.device_count(),
                              "unavailable_reason": rt.unavailable_reason(),
                              "cudnn": rt.cudnn_info()}  # fmt: skip

    def save() -> None:
        report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        out.write_text(json.dumps(report, indent=1))

    save()
    if "--controls" in sys.argv:
        report["controls"] = controls(rt, blobs)
        save()
    so = blobs / f"{name}.so"
    if not so.exists():
        report["error"] = "no blob (its compile step failed)"
        save()
        return 1
    ref = np.load(blobs / f"{name}.npz")
    inputs = [ref[k] for k in sorted(ref.files) if k.startswith("in")]
    expected = [ref[f"out{i}"] for i in range(len([k for k in ref.files if k.startswith("out")]))]
    source = BlobSource(so, None, so.read_bytes())
    if "--replay-only" in sys.argv:
        report["replay"] = replay_only(
            rt, source, inputs, expected, "--tf32" in sys.argv, "--tf32-matmul" in sys.argv
        )
        save()
        return 0
    # Eager, true float32.
    eager: dict[str, Any] = {"math": "float32 (cuDNN FMA math, cuBLAS(Lt) 32F compute)"}
    report["eager"] = eager
    before = counts(rt)
    start = time.perf_counter()
    model = load(rt, source, eager, graphs=False)
    outs = model(*inputs)
    eager["cold_load_and_first_run_ms"] = round((time.perf_counter() - start) * 1e3, 2)
    if not bench_only:
        eager.update(compare(outs, expected))
    eager["calls_in_first_run"] = delta(before, counts(rt))
    before = counts(rt)
    eager.update(timed(model, inputs))
    eager["calls_per_run"] = {k: round(v / max(1, eager["runs_per_block"] * 5 + 8), 2)
                              for k, v in delta(before, counts(rt)).items()}  # fmt: skip
    eager["cached_bytes_after"] = rt.cached_bytes()
    if counts(rt)["convs_on_host"]:
        eager["conv_fallback_reason"] = rt.last_conv_fallback()
    save()
    if bench_only:
        model.close()
        return 0
    # CUDA-graph replay.
    replay: dict[str, Any] = {}
    report["replay"] = replay
    graphs = load(rt, source, replay, graphs=True)
    replay["runs_match"] = [compare(graphs(*inputs), expected)["match"] for _ in range(4)]
    replay["graph_status"] = graphs.graph_status
    fresh = perturbed(inputs, 7)
    diff = compare(graphs(*fresh), [o.astype(np.float64) for o in model(*fresh)])
    replay["new_inputs_match_eager"] = diff["match"]
    replay["new_inputs_max_abs_diff"] = diff.get("max_abs_diff")
    replay.update(timed(graphs, inputs))
    replay["graph_status_after"] = graphs.graph_status
    graphs.close()
    save()
    # torch's default math: TF32 allowed in cuDNN convolutions (GEMMs stay float32).
    if eager["calls_in_first_run"]["convs_on_cudnn"]:
        rt.cudnn_tf32 = True
        tf32: dict[str, Any] = {
            "math": "TF32 in cuDNN convolutions, float32 GEMMs (torch's default)"
        }
        report["eager_tf32"] = tf32
        tf32_model = load(rt, source, tf32, graphs=False)
        tf32.update(compare(tf32_model(*inputs), expected, TF32_TOLERANCE))
        tf32.update(timed(tf32_model, inputs))
        tf32_model.close()
        save()
        replay_tf32: dict[str, Any] = {"math": tf32["math"]}
        report["replay_tf32"] = replay_tf32
        tf32_graphs = load(rt, source, replay_tf32, graphs=True)
        replay_tf32["runs_match"] = [
            compare(tf32_graphs(*inputs), expected, TF32_TOLERANCE)["match"] for _ in range(3)
        ]
        replay_tf32.update(timed(tf32_graphs, inputs))
        replay_tf32["graph_status_after"] = tf32_graphs.graph_status
        tf32_graphs.close()
        rt.cudnn_tf32 = False
        save()
    model.close()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
