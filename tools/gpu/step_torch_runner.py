"""GPU experiment step: torch's own CUDA runner on the same models, for latency.

Two ways, each if it works: (1) the SAME prefixed blob the slim runtime ran,
with shimkit's forwarding library (`<prefix>aoti_torch_x` -> libtorch's
`aoti_torch_x`) global; (2) torch's default (unprefixed) blob of the same
model. Inputs are CUDA tensors; every call is followed by a synchronize,
like the slim bench.

    python3 step_torch_runner.py BLOB_DIR OUT_JSON forward|default
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

ITERATIONS = {"mlp": 2000, "convnet": 200}


def make_runner(torch: Any, so: Path) -> Any:
    cls = torch._C._aoti.AOTIModelContainerRunnerCuda
    try:
        return cls(str(so), 1, "cuda", "")
    except TypeError:
        return cls(str(so), 1)


def measure(
    torch: Any, runner: Any, inputs: list[Any], ref: Any, iterations: int
) -> dict[str, object]:
    outs = runner.run(inputs)
    torch.cuda.synchronize()
    got = [o.cpu().numpy() for o in outs]
    expected = [ref[f"out{i}"] for i in range(len(got))]
    entry: dict[str, object] = {
        "match": all(
            np.allclose(g, e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected, strict=True)
        ),
        "max_abs_diff": max(
            float(np.max(np.abs(g - e))) for g, e in zip(got, expected, strict=True)
        ),
    }
    for _ in range(20):
        runner.run(inputs)
        torch.cuda.synchronize()
    # Five blocks; the median block is the figure (the machine's noise moved
    # single means by up to 2x between runs), min and max show the spread.
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations // 5):
            runner.run(inputs)
            torch.cuda.synchronize()
        blocks.append((time.perf_counter() - start) / (iterations // 5) * 1e6)
    entry["us_per_run"] = round(statistics.median(blocks), 2)
    entry["us_per_run_min_max"] = [round(min(blocks), 2), round(max(blocks), 2)]
    entry["iterations"] = iterations
    return entry


def main() -> int:
    blobs, out, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    faulthandler.enable()
    import torch

    report: dict[str, object] = {"torch": torch.__version__}
    # Python-loop floor: what a loop of synchronize() alone costs per iteration.
    torch.zeros(1, device="cuda")
    start = time.perf_counter()
    for _ in range(2000):
        torch.cuda.synchronize()
    report["python_sync_loop_us"] = round((time.perf_counter() - start) / 2000 * 1e6, 2)
    data: dict[str, Any] = {}
    for case in ("mlp", "convnet"):
        if (blobs / f"{case}.npz").exists():
            ref = np.load(blobs / f"{case}.npz")
            ins = [torch.from_numpy(ref[k]).cuda() for k in sorted(ref.files) if k.startswith("in")]
            data[case] = (ref, ins)
    if mode == "default" and (blobs / "mlp_default.so").exists() and "mlp" in data:
        print("torch runner: default blob", flush=True)
        try:
            ref, ins = data["mlp"]
            report["mlp_default_blob"] = measure(
                torch, make_runner(torch, blobs / "mlp_default.so"), ins, ref, ITERATIONS["mlp"]
            )
        except Exception as exc:
            report["mlp_default_blob"] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        if mode != "forward":
            raise RuntimeError("forwarding not asked for")
        from shimkit.aot.forward import build_forwarding_library, load_forwarding_library
        from shimkit.config import load_config
        from shimkit.header import find_torch, shim_names

        config = load_config()
        lib = build_forwarding_library(shim_names(find_torch().include_dir), config)
        load_forwarding_library(lib)
        report["forwarding_library"] = str(lib)
        for case in ("mlp", "convnet"):
            if case not in data or not (blobs / f"{case}.so").exists():
                continue
            ref, ins = data[case]
            print(f"torch runner: {case} through the forwarding library", flush=True)
            try:
                report[f"{case}_same_blob"] = measure(
                    torch, make_runner(torch, blobs / f"{case}.so"), ins, ref, ITERATIONS[case]
                )
            except Exception as exc:
                report[f"{case}_same_blob"] = {"error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:
        report["forwarding_error"] = f"{type(exc).__name__}: {exc}"
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
