"""GPU experiment step: where one run's GPU time goes, slim runtime or torch's runner.

torch's profiler (CUPTI) records every kernel, memcpy and memset launched in the
process, whichever library launched it, so the slim CUDA runtime's runs are profiled
the same way as torch's `AOTIModelContainerRunnerCuda`'s. Each side runs in its own
process (the forwarding library and the slim shims export the same prefixed names).
Reports the device time per run (the sum of the recorded GPU activities, a floor that
replaying a CUDA graph cannot go below) and the kernels that take most of it.

    python3 step_profile.py BUILD_DIR BLOB_DIR OUT_JSON MODEL slim|torch [--tf32]

--tf32: TF32 in cuDNN convolutions (torch's default), on either side; float32 matmuls.
The slim side runs through `CudaModel.bench` (inputs uploaded once, outputs left on
the device), as the latency figures are taken.
"""

from __future__ import annotations

import faulthandler
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RUNS = 20


def synced_us(torch: Any, call: Any, reps: int) -> float:
    """Mean wall time of `call()` in us, synchronised after each call, after one warm-up."""
    call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        call()
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def device_time(torch: Any, run_all: Any) -> dict[str, object]:
    """Profiles `run_all()` (RUNS synchronised calls) after one unprofiled warm-up of it."""
    from torch.profiler import ProfilerActivity, profile

    run_all()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_all()
        torch.cuda.synchronize()
    activities: list[tuple[float, float, str]] = []
    for avg in prof.key_averages():
        us = float(getattr(avg, "self_device_time_total", 0.0) or 0.0)
        if us > 0:
            activities.append((us / RUNS, int(avg.count) / RUNS, avg.key[:90]))
    activities.sort(reverse=True)
    kernels = [a for a in activities if not a[2].lower().startswith(("memcpy", "memset"))]
    return {
        "device_us_per_run": round(sum(a[0] for a in activities), 1),
        "kernel_us_per_run": round(sum(k[0] for k in kernels), 1),
        "kernels_per_run": round(sum(k[1] for k in kernels), 1),
        "top": [
            {"us_per_run": round(us, 1), "per_run": n, "name": name}
            for us, n, name in activities[:12]
        ],
    }


def main() -> int:
    faulthandler.enable()
    build, blobs, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    name, side = sys.argv[4], sys.argv[5]
    tf32 = "--tf32" in sys.argv
    import torch

    torch.zeros(1, device="cuda")
    ref = np.load(blobs / f"{name}.npz")
    arrays = [ref[k] for k in sorted(ref.files) if k.startswith("in")]
    so = blobs / f"{name}.so"
    report: dict[str, Any] = {"model": name, "side": side, "tf32_convs": tf32}
    if side == "slim":
        from shimkit.runtime.blob import BlobSource
        from shimkit.runtime.build import CUDA_RUNTIME_LIB, CUDA_SHIMS_LIB, RuntimeLibs
        from shimkit.runtime.cuda import CudaModel, cuda_runtime

        rt = cuda_runtime(RuntimeLibs(build / CUDA_SHIMS_LIB, build / CUDA_RUNTIME_LIB))
        rt.cudnn_tf32 = tf32
        model = CudaModel(BlobSource(so, None, so.read_bytes()), 0, lint=False, runtime=rt)
        report.update(device_time(torch, lambda: model.bench(*arrays, iterations=RUNS)))
        model.close()
    else:
        from shimkit.aot.forward import build_forwarding_library, load_forwarding_library
        from shimkit.config import load_config
        from shimkit.header import find_torch, shim_names
        from step_torch_runner import make_runner

        load_forwarding_library(
            build_forwarding_library(shim_names(find_torch().include_dir), load_config())
        )
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        runner = make_runner(torch, so)
        inputs = [torch.from_numpy(a).cuda() for a in arrays]

        def run_all() -> None:
            for _ in range(RUNS):
                runner.run(inputs)
                torch.cuda.synchronize()

        report.update(device_time(torch, run_all))
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
