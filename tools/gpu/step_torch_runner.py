"""GPU experiment step: torch's own CUDA runner on the same prefixed blob, for latency.

torch's `AOTIModelContainerRunnerCuda` runs the blob the slim runtime ran, with
shimkit's forwarding library (`<prefix>aoti_torch_x` -> libtorch's `aoti_torch_x`)
global, so both sides run the same kernels and shim calls. Inputs are CUDA tensors;
every call is followed by a synchronize, like the slim bench. Measured twice: with
torch's default math (TF32 allowed in cuDNN convolutions, float32 matmuls) and with
TF32 off everywhere (the slim runtime's default math); with --default-only, torch's
default math alone (the interleaved rounds of cuda_experiment.py), and with --tf32-matmul
as well, TF32 in matmuls too (torch.backends.cuda.matmul.allow_tf32=True).

    python3 step_torch_runner.py BLOB_DIR OUT_JSON MODEL [--default-only [--tf32-matmul]]
"""

from __future__ import annotations

import faulthandler
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BLOCK_SECONDS = 0.25


def make_runner(torch: Any, so: Path) -> Any:
    cls = torch._C._aoti.AOTIModelContainerRunnerCuda
    try:
        return cls(str(so), 1, "cuda", "")
    except TypeError:
        return cls(str(so), 1)


def timed(torch: Any, runner: Any, inputs: list[Any]) -> dict[str, object]:
    def block(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            runner.run(inputs)
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n * 1e6

    block(3)
    n = max(5, min(5000, int(BLOCK_SECONDS / max(block(5) * 1e-6, 1e-7))))
    blocks = [block(n) for _ in range(5)]
    return {
        "us_per_run": round(statistics.median(blocks), 2),
        "us_per_run_min_max": [round(min(blocks), 2), round(max(blocks), 2)],
        "runs_per_block": n,
    }


def compare(
    got: list[Any], expected: list[np.ndarray], tolerance: float | None = None
) -> dict[str, object]:
    values = [g.detach().cpu().numpy().astype(np.float64) for g in got]
    if len(values) != len(expected) or any(
        v.shape != e.shape for v, e in zip(values, expected, strict=True)
    ):
        return {"match": False}
    diff = max(
        float(np.max(np.abs(v - e))) if v.size else 0.0
        for v, e in zip(values, expected, strict=True)
    )
    scale = max(1.0, *(float(np.max(np.abs(e))) for e in expected if e.size))
    # float16 results carry ~3 decimal digits: compare at that precision.
    if tolerance is None:
        tolerance = 1e-2 if any(e.dtype == np.float16 for e in expected) else 1e-4
    return {"match": diff <= tolerance * scale, "max_abs_diff": diff}


def main() -> int:
    blobs, out, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    faulthandler.enable()
    import torch
    from shimkit.aot.forward import build_forwarding_library, load_forwarding_library
    from shimkit.config import load_config
    from shimkit.header import find_torch, shim_names

    report: dict[str, Any] = {"model": name, "torch": torch.__version__}
    torch.zeros(1, device="cuda")
    so = blobs / f"{name}.so"
    if not so.exists():
        report["error"] = "no blob (its compile step failed)"
        out.write_text(json.dumps(report, indent=1))
        return 1
    ref = np.load(blobs / f"{name}.npz")
    inputs = [torch.from_numpy(ref[k]).cuda() for k in sorted(ref.files) if k.startswith("in")]
    expected = [ref[f"out{i}"] for i in range(len([k for k in ref.files if k.startswith("out")]))]
    lib = build_forwarding_library(shim_names(find_torch().include_dir), load_config())
    load_forwarding_library(lib)
    runner = make_runner(torch, so)
    if "--tf32-matmul" in sys.argv:
        torch.backends.cuda.matmul.allow_tf32 = True
    flags = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    default: dict[str, Any] = {
        "math": f"cudnn.allow_tf32={flags[0]}, cuda.matmul.allow_tf32={flags[1]}"
    }
    report["default_math"] = default
    # TF32 matmuls keep 10 mantissa bits: as step_slim.py's TF32_TOLERANCE.
    tolerance = 5e-3 if flags[1] else None
    default.update(compare(runner.run(inputs), expected, tolerance))
    default.update(timed(torch, runner, inputs))
    out.write_text(json.dumps(report, indent=1))
    if "--default-only" in sys.argv:
        return 0
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    strict: dict[str, Any] = {
        "math": "float32: cudnn.allow_tf32=False, cuda.matmul.allow_tf32=False"
    }
    report["float32"] = strict
    strict.update(compare(runner.run(inputs), expected))
    strict.update(timed(torch, runner, inputs))
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
