"""GPU experiment step: the slim runtime next to libtorch_cuda, with the binding proof.

libtorch_cuda.so (and libtorch_cpu.so) are made global first, so torch's own,
unprefixed aoti_torch_* functions are in global scope; then the prefixed
blobs are loaded through the slim runtime and run. The resolved GOT of each
blob shows where every shim import bound.

    python3 step_probe.py BUILD_DIR BLOB_DIR OUT_JSON
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import sys
from pathlib import Path

import numpy as np
import slim_cuda


def main() -> int:
    faulthandler.enable()
    build, blobs, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    import torch
    from shimkit.config import load_config
    from shimkit.runtime.bindings import resolved_imports

    config = load_config()
    torch_lib = Path(torch.__file__).parent / "lib"
    for name in ("libtorch_cpu.so", "libtorch_cuda.so"):
        ctypes.CDLL(str(torch_lib / name), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    torch.zeros(1, device="cuda")  # torch's CUDA context exists too
    rt = slim_cuda.Runtime(build / "libshimkit_cuda_runtime.so")
    shims_path = os.path.realpath(build / "libshimkit_cuda_shims.so")
    report: dict[str, object] = {"torch": torch.__version__, "provider": shims_path}
    for case in ("mlp", "convnet"):
        so = blobs / f"{case}.so"
        if not so.exists():
            report[case] = {"error": "no blob"}
            continue
        data = so.read_bytes()
        ref = np.load(blobs / f"{case}.npz")
        inputs = [ref[k] for k in sorted(ref.files) if k.startswith("in")]
        entry: dict[str, object] = {}
        try:
            model = rt.load(data, 0)
            outs = model.run(inputs)
            expected = [ref[f"out{i}"] for i in range(len(outs))]
            entry["match"] = all(
                np.allclose(g, e, rtol=1e-4, atol=1e-4) for g, e in zip(outs, expected, strict=True)
            )
            entry["max_abs_diff"] = max(
                float(np.max(np.abs(g - e))) for g, e in zip(outs, expected, strict=True)
            )
            bindings = resolved_imports(data, model.load_base)
            shim = [
                b
                for b in bindings
                if config.is_prefixed_family(b.symbol) or config.is_family(b.symbol)
            ]
            where = {b.symbol: os.path.realpath(b.library) if b.library else None for b in shim}
            entry["shim_imports"] = len(shim)
            entry["bound_to_slim"] = sum(1 for lib in where.values() if lib == shims_path)
            entry["bound_elsewhere"] = {n: lib for n, lib in where.items() if lib != shims_path}
            entry["unprefixed_imports"] = sorted(
                b.symbol for b in shim if config.is_family(b.symbol)
            )
            entry["proof_ok"] = (
                entry["shim_imports"] > 0
                and entry["bound_to_slim"] == entry["shim_imports"]
                and not entry["unprefixed_imports"]
            )
            entry["us_per_run_next_to_libtorch"] = round(model.bench(inputs, 500) / 1e3, 2)
            model.free()
        except slim_cuda.SlimCudaError as exc:
            entry["error"] = str(exc)
        report[case] = entry
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
