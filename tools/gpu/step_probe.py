"""GPU experiment step: `shimkit probe` on CUDA blobs next to libtorch_cuda (the binding proof).

torch's CUDA context is created first, then the package's probe
(`shimkit.runtime.probe.probe`, what `shimkit probe` runs) makes libtorch_cpu.so and
libtorch_cuda.so global, so torch's own, unprefixed aoti_torch_* functions are in
global scope; it loads each prefixed blob through the slim CUDA runtime, runs it on
zeros when the shapes are known, and reads the blob's resolved GOT: every shim import
must bind to the slim CUDA shims.

    SHIMKIT_LIB_DIR=BUILD_DIR python3 step_probe.py BLOB_DIR OUT_JSON MODEL...
"""

from __future__ import annotations

import faulthandler
import json
import sys
from dataclasses import asdict
from pathlib import Path


def main() -> int:
    faulthandler.enable()
    blobs, out, models = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    import torch
    from shimkit.runtime.probe import probe

    torch.zeros(1, device="cuda")  # torch's CUDA context exists too
    report: dict[str, object] = {"torch": torch.__version__}
    for name in models:
        so = blobs / f"{name}.so"
        try:
            result = probe(so, device="cuda", run=False)
            report[name] = {
                "ok": result.ok,
                "provider": result.provider,
                "libtorch": [result.libtorch, result.libtorch_cuda],
                "shim_imports": len(result.bindings),
                "bound_to_slim": len(result.to_provider),
                "bound_to_libtorch": [asdict(b) for b in result.to_libtorch],
                "lint_errors": result.lint_errors,
            }
        except Exception as exc:  # one model's failure must not hide the others
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
        out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
