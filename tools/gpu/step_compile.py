"""GPU experiment step: compile one case into a .pt2 and save eager reference data.

    python3 step_compile.py CASE OUT_DIR
CASE: mlp | convnet (prefixed CUDA), mlp_default (torch's default CUDA
blob), mlp_cpu (prefixed CPU blob: the wrong-device control).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import cuda_models
import numpy as np


def main() -> int:
    case, out = sys.argv[1], Path(sys.argv[2])
    import torch
    from shimkit.aot.compile import compile_model
    from shimkit.aot.cuda import compile_cuda
    from shimkit.aot.pt2 import read_blobs
    from shimkit.checks.blob import read_blob_image
    from shimkit.config import load_config

    def blob_facts(data: bytes, name: str) -> tuple[list[str], list[str]]:
        """(imports, needed) of a blob, as the linter reads it."""
        image = read_blob_image(data, name)
        return sorted({s.name for s in image.imports}), image.needed

    config = load_config()
    model_name = case.split("_")[0]
    device = "cpu" if case.endswith("_cpu") else "cuda"
    model, inputs = cuda_models.build(model_name, device)
    ref = cuda_models.eager(model, inputs)
    np.savez(
        out / f"{case}.npz",
        **{f"in{i}": t.cpu().numpy() for i, t in enumerate(inputs)},
        **{f"out{i}": t.numpy() for i, t in enumerate(ref)},
    )
    reuse = os.environ.get("SHIMKIT_REUSE_BLOBS")
    if reuse and (Path(reuse) / f"{case}.so").exists():
        # A blob compiled by an earlier run (same seed, same weights): only the
        # eager reference above is recomputed.
        data = (Path(reuse) / f"{case}.so").read_bytes()
        (out / f"{case}.so").write_bytes(data)
        imports, needed = blob_facts(data, case)
        shim = sorted(n for n in imports if n.startswith(config.prefix))
        report = {
            "case": case,
            "torch": torch.__version__,
            "compile_seconds": 0.0,
            "reused": reuse,
            "problems": [],
            "blobs": {
                case: {
                    "bytes": len(data),
                    "needed": needed,
                    "imports": imports,
                    "shim_imports": shim,
                }
            },
        }
        (out / f"compile_{case}.json").write_text(json.dumps(report, indent=1))
        print(json.dumps({"case": case, "reused": reuse}))
        return 0
    pt2 = out / f"{case}.pt2"
    start = time.perf_counter()
    problems: list[str] = []
    options: dict[str, str] = {}
    if device == "cpu":
        # The wrong-device control: no closure check (the GPU machine builds no CPU shims).
        compile_model(
            model, inputs, pt2, config=config, force=True, show_progress=False, target=None
        )
    else:
        result = compile_cuda(
            model, inputs, pt2, config=config, prefixed=case != "mlp_default", force=True
        )
        problems, options = result.problems, result.options
    seconds = time.perf_counter() - start
    blobs = read_blobs(pt2)
    info = {}
    for name, data in blobs.items():
        imports, needed = blob_facts(data, name)
        (out / f"{case}.so").write_bytes(data)
        info[name] = {
            "bytes": len(data),
            "needed": needed,
            "imports": imports,
            "shim_imports": sorted(
                n for n in imports if "aoti_torch" in n or n.startswith(config.prefix)
            ),
        }
    report = {
        "case": case,
        "torch": torch.__version__,
        "compile_seconds": round(seconds, 1),
        "problems": problems,
        "options": options,
        "blobs": info,
    }
    (out / f"compile_{case}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("case", "compile_seconds", "problems")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
