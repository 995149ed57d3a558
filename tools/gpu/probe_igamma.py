"""GPU probe: igammac in shimkit's slim CUDA form (shimkit.aot.incomplete_gamma) against ATen's
CUDA kernel, same process, same inputs (a in [0.05, 50], x in [0, 100], float32).

Both sides have their inputs on the device and are synchronised after every call: the slim
blob through `CudaModel.bench` (eager, and with CUDA-graph replay), ATen by a loop of
`torch.igammac` and `torch.cuda.synchronize`. (Calling the loaded model itself would copy its
inputs from and its outputs to the host, which at these sizes takes longer than the kernels.)
Also the kernel time per call (step_profile.py's device time: torch's profiler, memcpy and
memset left out) and each side's largest relative error against ATen in float64. Prints one
JSON line per size; results in docs/benchmarks.md. Needs the slim CUDA libraries
(tools/gpu/build_cuda_libs.py) in $SHIMKIT_LIB_DIR and this checkout's lint/ on PYTHONPATH.

    python3 tools/gpu/probe_igamma.py [ELEMENTS ...]   (default 65536 4194304)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import shimkit.runtime
import torch
from step_profile import RUNS, device_time, synced_us


def model_file(path: Path, elements: int) -> None:
    path.write_text(
        textwrap.dedent(f"""
            import torch

            class Upper(torch.nn.Module):
                def forward(self, a, x):
                    return torch.igammac(a, x)

            g = torch.Generator().manual_seed(0)
            model = Upper()
            example_inputs = (
                torch.rand({elements}, generator=g) * 50 + 0.05,
                torch.rand({elements}, generator=g) * 100,
            )
        """)
    )


def kernel_us(call: Any) -> float:
    """Kernel time per call of `call`, from step_profile's device time of RUNS calls."""

    def run_all() -> None:
        for _ in range(RUNS):
            call()

    return float(device_time(torch, run_all)["kernel_us_per_run"])


def probe(work: Path, elements: int) -> dict[str, object]:
    source, package = work / f"upper_{elements}.py", work / f"upper_{elements}.pt2"
    model_file(source, elements)
    started = time.perf_counter()
    compiled = subprocess.run(
        [sys.executable, "-m", "shimkit", "compile", str(source), "-o", str(package),
         "--device", "cuda", "--force"],
        capture_output=True, text=True,
    )  # fmt: skip
    row: dict[str, object] = {"elements": elements}
    if compiled.returncode:
        row["compile_error"] = (compiled.stdout + compiled.stderr)[-2000:]
        return row
    row["compile_s"] = round(time.perf_counter() - started, 1)
    namespace: dict[str, Any] = {}
    exec(source.read_text(), namespace)
    host = [value.numpy() for value in namespace["example_inputs"]]
    a, x = (value.cuda() for value in namespace["example_inputs"])
    exact = torch.igammac(a.double(), x.double())

    def error(got: Any) -> float:
        return ((got.double() - exact).abs() / exact.abs().clamp_min(1e-30)).max().item()

    reps = 200 if elements < 1 << 20 else 20
    row["aten_us"] = synced_us(torch, lambda: torch.igammac(a, x), reps)
    row["aten_kernel_us"] = kernel_us(lambda: torch.igammac(a, x))
    row["aten_max_rel_error"] = error(torch.igammac(a, x))
    eager = shimkit.runtime.load(package, device="cuda")
    graphs = shimkit.runtime.load(package, device="cuda", graphs=True)
    try:
        for _ in range(3):
            graphs(*host)
        row["slim_eager_us"] = eager.bench(*host, iterations=reps) / 1e3
        row["slim_replay_us"] = graphs.bench(*host, iterations=reps) / 1e3
        row["slim_kernel_us"] = kernel_us(lambda: eager.bench(*host, iterations=1))
        row["slim_max_rel_error"] = error(torch.from_numpy(np.array(eager(*host)[0])).cuda())
        row["graph_status"] = graphs.graph_status
    finally:
        eager.close()
        graphs.close()
    row["replay_ratio"] = row["slim_replay_us"] / row["aten_us"]
    return row


def main() -> int:
    sizes = [int(arg) for arg in sys.argv[1:]] or [65536, 4 << 20]
    with tempfile.TemporaryDirectory(prefix="probe-igamma-") as work:
        for elements in sizes:
            print(json.dumps(probe(Path(work), elements)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
