"""A user's model file on CUDA, the way a user runs one: `shimkit compile FILE --device
cuda` (its notes and any refusal as printed), then the package on the slim CUDA runtime with
CUDA-graph replay, against the model's own eager run on the GPU.

Runs one file (cuda_experiment.py --model-files DIR runs every *.py in DIR, in parallel
with the zoo): held-out models this repository has not seen, kept outside it. Three runs on
the example inputs (eager, captured, replayed), each compared with eager; the report has
the compile's rc and output, each run's verdict, the largest difference and the graph
status (whether the run replays, or which host steps it has).

    SHIMKIT_LIB_DIR=BUILD_DIR python3 step_model_file.py OUT_JSON MODEL_FILE WORK_DIR
"""

from __future__ import annotations

import faulthandler
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

from step_zoo import compare, to_device

COMPILE_LIMIT = 400  # seconds for `shimkit compile`


def main() -> int:
    faulthandler.enable()
    out, source, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    import shimkit.runtime
    import torch

    pt2 = work / f"file_{source.stem}.pt2"
    argv = [sys.executable, "-m", "shimkit", "compile", str(source), "-o", str(pt2)]
    compiled = subprocess.run(
        [*argv, "--device", "cuda", "--force"],
        capture_output=True, text=True, timeout=COMPILE_LIMIT,
    )  # fmt: skip
    report: dict[str, Any] = {
        "file": source.name,
        "compile_rc": compiled.returncode,
        # shimkit's own lines (its notes name the file or start "shimkit:"), then the
        # last of torch's; torch's warnings would push the notes out of a plain tail.
        "compile_output": [
            line
            for line in (compiled.stdout + compiled.stderr).strip().splitlines()
            if line.startswith(("shimkit:", str(source), str(pt2)))
        ]
        + (compiled.stdout + compiled.stderr).strip().splitlines()[-6:],
    }
    if compiled.returncode == 0:
        # Float32 on both sides, as the zoo compares (eager's cuDNN convolutions would use
        # TF32 by default; the slim runtime's do not unless asked).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        namespace = runpy.run_path(str(source))
        model = namespace["model"].eval().to("cuda")
        inputs = tuple(to_device(x, "cuda") for x in namespace["example_inputs"])
        with torch.no_grad():
            expected = torch.utils._pytree.tree_leaves(model(*inputs))  # as the runtime's list
        # A half-precision model's eager and slim runs round differently along the way.
        halves = (torch.float16, torch.bfloat16)
        rtol = 2e-2 if any(p.dtype in halves for p in model.parameters()) else 1e-4
        slim = shimkit.runtime.load(pt2, device="cuda", graphs=True)
        try:
            runs = [compare(slim(*inputs), expected, rtol) for _ in range(3)]
            report["graph_status"] = slim.graph_status
        finally:
            slim.close()
        report["runs"] = runs
        report["match"] = all(r["match"] for r in runs)
        report["max_rel_diff"] = max(r.get("max_rel_diff", 0.0) for r in runs)
    out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
