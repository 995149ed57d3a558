"""GPU experiment step: run the prefixed CUDA blobs through the slim runtime.

No torch in this process: numpy, ctypes and the slim libraries only.

    python3 step_slim.py BUILD_DIR BLOB_DIR OUT_JSON [--bench-only]
"""

from __future__ import annotations

import faulthandler
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import slim_cuda

ITERATIONS = {"mlp": 2000, "convnet": 200}


def compare(got: list[np.ndarray], ref: np.lib.npyio.NpzFile) -> dict[str, object]:
    expected = [ref[f"out{i}"] for i in range(len(got))]
    diffs = [
        float(np.max(np.abs(g - e))) if g.size else 0.0 for g, e in zip(got, expected, strict=True)
    ]
    ok = all(
        g.shape == e.shape and np.allclose(g, e, rtol=1e-4, atol=1e-4)
        for g, e in zip(got, expected, strict=True)
    )
    return {"match": ok, "max_abs_diff": max(diffs) if diffs else 0.0}


def check_replay(
    rt: slim_cuda.Runtime, blob: bytes, model: slim_cuda.Model, inputs: list[np.ndarray],
    ref: np.lib.npyio.NpzFile,
) -> dict[str, object]:  # fmt: skip
    """Runs 2 (captured) and 3-4 (replayed) against the reference, then new input values
    through the replay against an eager model: the captured input buffers really refill."""
    runs = [compare(model.run(inputs), ref) for _ in range(3)]
    scaled = [x * np.float32(0.5) + np.float32(0.25) for x in inputs]
    replayed = model.run(scaled)
    eager = rt.load(blob, 0)
    try:
        expected = eager.run(scaled)
    finally:
        eager.free()
    diff = max(float(np.max(np.abs(g - e))) for g, e in zip(replayed, expected, strict=True))
    return {
        "graph_status": model.graph_status(),
        "replay_runs_match": all(bool(r["match"]) for r in runs),
        "replay_new_inputs_max_abs_diff_vs_eager": diff,
        "replay_new_inputs_match": diff <= 1e-4,
    }


def expect_error(rt: slim_cuda.Runtime, blob: bytes, device: int, status: str) -> dict[str, object]:
    try:
        model = rt.load(blob, device)
    except slim_cuda.SlimCudaError as exc:
        return {"ok": exc.status == status, "got": str(exc)}
    model.free()
    return {"ok": False, "got": "loaded"}


def main() -> int:
    faulthandler.enable()
    build, blobs, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    bench_only = "--bench-only" in sys.argv
    graphs = "--graphs" in sys.argv  # CUDA-graph replay (shimkit_cuda_model_use_graphs)
    rt = slim_cuda.Runtime(build / "libshimkit_cuda_runtime.so")
    report: dict[str, object] = {
        "devices": rt.device_count(),
        "unavailable_reason": rt.unavailable_reason(),
        "cudnn": rt.cudnn_info(),
    }
    for case in ("mlp", "convnet"):
        so = blobs / f"{case}.so"
        if not so.exists():
            report[case] = {"error": "no blob (compile step failed)"}
            continue
        ref = np.load(blobs / f"{case}.npz")
        inputs = [ref[k] for k in sorted(ref.files) if k.startswith("in")]
        entry: dict[str, object] = {}
        convs_before, gemms_before = rt.conv_counts(), rt.gemm_counts()
        try:
            start = time.perf_counter()
            model = rt.load(so.read_bytes(), 0)
            if graphs:
                model.use_graphs(True)
            outs = model.run(inputs)
            entry["cold_load_and_first_run_ms"] = round((time.perf_counter() - start) * 1e3, 2)
            entry.update(compare(outs, ref))
            if graphs:
                entry.update(check_replay(rt, so.read_bytes(), model, inputs, ref))
            model.bench(inputs, 20)  # warm up
            # Five blocks, median reported (as step_torch_runner.py does).
            blocks = [model.bench(inputs, ITERATIONS[case] // 5) / 1e3 for _ in range(5)]
            entry["us_per_run"] = round(statistics.median(blocks), 2)
            entry["us_per_run_min_max"] = [round(min(blocks), 2), round(max(blocks), 2)]
            entry["iterations"] = ITERATIONS[case]
            entry["cached_bytes_after"] = rt.cached_bytes()
            model.free()
        except slim_cuda.SlimCudaError as exc:
            entry["error"] = str(exc)
        convs = rt.conv_counts()
        entry["convs_on_cudnn"] = convs[0] - convs_before[0]
        entry["convs_on_host"] = convs[1] - convs_before[1]
        gemms = rt.gemm_counts()
        entry["gemms_on_cublaslt"] = gemms[0] - gemms_before[0]
        entry["gemms_on_cublas"] = gemms[1] - gemms_before[1]
        if entry["convs_on_host"]:
            entry["conv_fallback_reason"] = rt.last_conv_fallback()
        report[case] = entry
    if not bench_only and "--no-controls" not in sys.argv:
        controls: dict[str, object] = {}
        mlp = (blobs / "mlp.so").read_bytes() if (blobs / "mlp.so").exists() else b""
        if mlp:
            controls["device_index_out_of_range"] = expect_error(rt, mlp, 7, "SHIMKIT_E_DEVICE")
            controls["negative_device_index"] = expect_error(rt, mlp, -1, "SHIMKIT_E_DEVICE")
            controls["truncated_blob"] = expect_error(rt, mlp[:4096], 0, "SHIMKIT_E_BAD_BLOB")
        if (blobs / "mlp_cpu.so").exists():
            controls["cpu_blob_on_cuda"] = expect_error(
                rt, (blobs / "mlp_cpu.so").read_bytes(), 0, "SHIMKIT_E_DEVICE"
            )
        if (blobs / "mlp_default.so").exists():
            controls["unprefixed_blob"] = expect_error(
                rt, (blobs / "mlp_default.so").read_bytes(), 0, "SHIMKIT_E_MISSING_SHIM"
            )
        report["controls"] = controls
        bandwidth: dict[str, object] = {}
        for label, pinned in (("pinned", True), ("pageable", False)):
            try:
                bandwidth[f"{label}_gb_per_s"] = round(rt.h2d_bandwidth(256 << 20, pinned, 0, 5), 2)
            except slim_cuda.SlimCudaError as exc:
                bandwidth[f"{label}_error"] = str(exc)
        if "pinned_gb_per_s" in bandwidth and "pageable_gb_per_s" in bandwidth:
            bandwidth["ratio"] = round(
                float(bandwidth["pinned_gb_per_s"]) / float(bandwidth["pageable_gb_per_s"]), 2
            )
        bandwidth["bytes"] = 256 << 20
        report["h2d_bandwidth"] = bandwidth
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
