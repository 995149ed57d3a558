"""GPU experiment step: compile one model into a prefixed blob and save eager reference data.

    python3 step_compile.py MODEL OUT_DIR          # CUDA (tools/gpu/cuda_models.py)
    python3 step_compile.py mlp_cpu OUT_DIR        # the prefixed CPU MLP: wrong-device control

Writes OUT_DIR/MODEL.npz (inputs in*, fp32 eager outputs out*), OUT_DIR/MODEL.so (the
blob) and OUT_DIR/compile_MODEL.json. CUDA models are compiled like `shimkit compile
--device cuda`: attention in its math form, weights frozen, kernels embedded, checked
against the slim CUDA shims (--target slim-cuda). When that check fails, its message
(naming each missing shim) is recorded and the blob is compiled again without the check,
so that torch's runner can still be measured on it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import cuda_models
import numpy as np


def main() -> int:
    name, out = sys.argv[1], Path(sys.argv[2])
    import torch
    from shimkit.aot.compile import compile_exported, export_program_on, in_math_form
    from shimkit.aot.pt2 import read_blobs
    from shimkit.config import load_config
    from shimkit.elf import read_elf
    from shimkit.errors import ShimkitError

    config = load_config()
    cpu = name.endswith("_cpu")
    model_name = name.removesuffix("_cpu")
    device = "cpu" if cpu else "cuda"
    model, inputs, source = cuda_models.build(model_name, device)
    ref = cuda_models.eager(model, inputs)
    np.savez(
        out / f"{name}.npz",
        **{f"in{i}": t.cpu().numpy() for i, t in enumerate(inputs)},
        **{f"out{i}": t.numpy() for i, t in enumerate(ref)},
    )
    report: dict[str, object] = {"model": name, "source": source, "torch": torch.__version__}
    start = time.perf_counter()
    exported, report["export_notes"] = export_program_on(torch, model, inputs, name, device)
    if not cpu:
        exported, report["math_form"] = in_math_form(torch, exported, True, True, slim_cuda=True)
    pt2 = out / f"{name}.pt2"
    target = "slim-cpu" if cpu else "slim-cuda"
    try:
        compile_exported(exported, pt2, config=config, force=True, label=name,
                         show_progress=False, target=target, device=device)  # fmt: skip
    except ShimkitError as exc:
        report["closure_error"] = str(exc)
        compile_exported(exported, pt2, config=config, force=True, label=name,
                         show_progress=False, target=None, device=device)  # fmt: skip
    report["compile_seconds"] = round(time.perf_counter() - start, 1)
    [(member, data)] = read_blobs(pt2).items()
    (out / f"{name}.so").write_bytes(data)
    image = read_elf(data, member)
    imports = sorted(s.name for s in image.imports)
    report["blob_bytes"] = len(data)
    report["needed"] = list(image.needed)
    report["shim_imports"] = [n for n in imports if config.is_prefixed_family(n)]
    report["unprefixed_shim_imports"] = [n for n in imports if config.is_family(n)]
    (out / f"compile_{name}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("model", "compile_seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
