"""GPU experiment step: torch's own CUDA runner on a zoo model's blob (step_zoo.py's peer).

The blob of the package step_zoo.py compiled runs on torch's `AOTIModelContainerRunnerCuda`
with shimkit's forwarding library global (as in step_torch_runner.py), on every input set
step_zoo.py saved; the outputs are saved for step_zoo.py to compare with the slim runtime's
and with eager, with --timed also its time per run on the first input set
(step_torch_runner.timed). Its own process: the forwarding library and the slim CUDA shims
export the same prefixed names, so one process holds one of them.

    python3 step_zoo_peer.py PACKAGE.pt2 INPUTS.pt OUTPUTS.pt [--timed]
"""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path


def main() -> int:
    faulthandler.enable()
    package, inputs_path, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    import torch
    from shimkit.aot.forward import build_forwarding_library, load_forwarding_library
    from shimkit.aot.pt2 import read_blobs
    from shimkit.config import load_config
    from shimkit.header import find_torch, shim_names
    from step_torch_runner import make_runner, timed

    # step_zoo.py's math: true float32 (torch's default would run convolutions in TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    [blob] = read_blobs(package).values()
    so = out.with_suffix(".so")
    so.write_bytes(blob)
    load_forwarding_library(build_forwarding_library(shim_names(find_torch().include_dir),
                                                     load_config()))  # fmt: skip
    runner = make_runner(torch, so)
    input_sets = torch.load(inputs_path, weights_only=True)
    outputs = []
    with torch.no_grad():
        for inputs in input_sets:
            got = runner.run([t.cuda() for t in inputs])
            outputs.append([t.cpu() for t in got])
        saved: dict[str, object] = {"outputs": outputs}
        if "--timed" in sys.argv[4:]:
            saved["first_input_timing"] = timed(torch, runner, [t.cuda() for t in input_sets[0]])
    torch.save(saved, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
