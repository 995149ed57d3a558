"""GPU experiment step: one model of the CPU test suite's zoo (tests/models/zoo.py) on CUDA.

The families the CPU suite compiles and runs in `make test` (ResNet-style, inverted
residual, U-Net, transformer encoder, decoder-only GPT with causal SDPA and GQA, SDPA with
masks, LSTM/biLSTM/GRU, embedding-bag recommender, index/scan/search ops, float16/bfloat16,
dynamic batch, large-window pooling, detection post-processing, 3-D video layers,
antialiased resizing, an STFT audio net, token counts with bincount and unique, a vision
transformer, a conformer convolution module, top-k mixture of experts, a sampling head
with a top-k and a sort over a vocabulary and a max embedding bag), here moved to the GPU: exported
on CUDA with the zoo's dynamic shapes, compiled the way `shimkit compile --device cuda`
does (attention in math form, weights frozen, kernels embedded, checked against the slim
CUDA shims), run on the slim CUDA runtime for every input set the zoo gives (the dynamic
MLP: batch 4, 2 and 200) and compared with float32 eager on the GPU within the zoo's
tolerance (ZooModel.rtol, what the CPU suite uses; integers and bools exactly). The same
blob also runs on torch's own runner (step_zoo_peer.py, its own process): each run says
whether the slim runtime gives what torch's runner gives, so an output that differs from
eager in both is the blob's (Inductor's), not the slim runtime's. The outputs compile found
handed back in another shape than the exported program gives are listed (`shape_warnings`,
shimkit.aot.outputs).

With --timed (run alone on the machine: cuda_experiment.py --zoo-timed), the first input set
also runs with CUDA-graph replay (whether it replays or why not, and whether four runs match
eager: the first input set twice, new floating values of the same geometry, the first set
again), and the time per run of slim eager, slim replay and torch's runner on the same
blob is measured (step_slim.timed and step_torch_runner.timed: five blocks, the median).

    SHIMKIT_LIB_DIR=BUILD_DIR python3 step_zoo.py OUT_JSON MODEL WORK_DIR [--timed]
"""

from __future__ import annotations

import faulthandler
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PEER_LIMIT = 150  # seconds for torch's runner on every input set (its import included)


def to_device(value: Any, device: str) -> Any:
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


def compare(got: list[np.ndarray], expected: list[Any], rtol: float) -> dict[str, object]:
    """Each output against eager: floats within `rtol` of the reference's scale, integers and
    bools exactly; a shape difference is reported with both shapes."""
    refs = [e.detach().cpu() for e in expected]
    if len(got) != len(refs):
        return {"match": False, "outputs": f"{len(got)} outputs, eager has {len(refs)}"}
    outputs: list[object] = []
    worst = 0.0
    for g, r in zip(got, refs, strict=True):
        if g.shape != tuple(r.shape):
            # A blob may hand an output back in another shape than eager (Inductor's code
            # decides): reported, never a match, with whether the values agree reshaped.
            entry: dict[str, object] = {"shape": list(g.shape), "eager_shape": list(r.shape)}
            if g.size == r.numel():
                ref = r.double().numpy()
                scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
                diff = float(np.max(np.abs(g.reshape(ref.shape) - ref))) if ref.size else 0.0
                entry["values_match_reshaped"] = diff <= rtol * scale
            outputs.append(entry)
        elif not r.is_floating_point():
            outputs.append(bool(np.array_equal(g, r.numpy())))
        else:
            ref = r.double().numpy()
            scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
            diff = float(np.max(np.abs(g.astype(np.float64) - ref))) if ref.size else 0.0
            worst = max(worst, diff / scale)
            outputs.append(diff <= rtol * scale)
    return {"match": all(o is True for o in outputs), "max_rel_diff": worst, "outputs": outputs}


def as_numpy(t: Any) -> np.ndarray:
    """A torch tensor's values on the host: floats as float64 (bfloat16 has no numpy type)."""
    t = t.detach().cpu()
    return t.double().numpy() if t.is_floating_point() else t.numpy()


def run_peer(
    pt2: Path, input_sets: list[tuple[Any, ...]], work: Path, timed: bool
) -> dict[str, Any] | str:
    """torch's runner's outputs for every input set (step_zoo_peer.py), and with `timed` its
    time per run on the first; or why there are none."""
    import torch

    inputs, outputs = work / f"{pt2.stem}.peer-in.pt", work / f"{pt2.stem}.peer-out.pt"
    torch.save([[t.detach().cpu() for t in s] for s in input_sets], inputs)
    argv = [sys.executable, str(Path(__file__).with_name("step_zoo_peer.py")), str(pt2),
            str(inputs), str(outputs), *(["--timed"] if timed else [])]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PEER_LIMIT)
    except subprocess.TimeoutExpired:
        return f"torch's runner: no result in {PEER_LIMIT} s"
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return f"torch's runner failed (rc {done.returncode}): {' | '.join(tail)}"
    result: dict[str, Any] = torch.load(outputs, weights_only=True)
    return result


def perturbed(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Inputs of the same geometry with new floating values (integer inputs, often indices
    or offsets, are kept): what shows that a replay computes from its own inputs."""
    import torch

    generator = torch.Generator(device="cpu").manual_seed(7)

    def new_values(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        noise = torch.randn(t.shape, generator=generator).to(t.device, t.dtype)
        return t.clone().add_(noise)  # clone keeps the strides (channels_last inputs too)

    return tuple(new_values(t) for t in inputs)


def replay_and_timing(
    pt2: Path, model: Any, first: tuple[Any, ...], expected: list[Any], slim: Any, rtol: float
) -> dict[str, Any]:
    """CUDA-graph replay (status; runs on the first input set, on new values of the same
    geometry, and on the first again, each against eager), and slim eager's and replay's
    time per run on the first input set."""
    import shimkit.runtime
    import torch
    from step_slim import timed

    second = perturbed(first)
    with torch.no_grad():
        second_expected = model(*second)
    if isinstance(second_expected, torch.Tensor):
        second_expected = [second_expected]
    plan = [(first, expected)] * 2 + [(second, list(second_expected)), (first, expected)]
    replaying = shimkit.runtime.load(pt2, device="cuda", graphs=True)
    try:
        matches = [compare(replaying(*inputs), want, rtol)["match"] for inputs, want in plan]
        return {
            "graph_status": replaying.graph_status,
            # Run 1 eager, run 2 captured, runs 3 (new values) and 4 replayed.
            "replay_matches": matches,
            "slim_eager_us": timed(slim, list(first))["us_per_run"],
            "slim_replay_us": timed(replaying, list(first))["us_per_run"],
        }
    finally:
        replaying.close()


def main() -> int:
    faulthandler.enable()
    out, name, work = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    timed = "--timed" in sys.argv[4:]
    import shimkit.runtime
    import torch
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError
    from shimkit.runtime.cuda import cuda_runtime

    from tests.models.zoo import ZOO

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Eager's reference is the program torch.export traces: nn.TransformerEncoderLayer's
    # standard path. Its CUDA fast path (eval, no grad: one fused op) differs from it by up
    # to 3.6e-4 of the output's scale for a pre-norm GELU encoder, in float64 too, while the
    # slim blob is within 3e-7 of the standard path (docs/benchmarks.md, 2026-12-05 16:00).
    torch.backends.mha.set_fastpath_enabled(False)
    report: dict[str, Any] = {"model": name}

    def save() -> None:
        out.write_text(json.dumps(report, indent=1))

    zoo = ZOO[name]()
    model = zoo.model.to("cuda").eval()
    input_sets = [zoo.inputs, *zoo.more_inputs]
    input_sets = [tuple(to_device(v, "cuda") for v in inputs) for inputs in input_sets]
    start = time.perf_counter()
    exported = torch.export.export(model, input_sets[0], dynamic_shapes=zoo.dynamic_shapes)
    exported, report["math_form"] = in_math_form(torch, exported, True, True, slim_cuda=True)
    pt2 = work / f"zoo_{name}.pt2"
    try:
        compiled = compile_exported(exported, pt2, force=True, label=name, show_progress=False,
                                    target="slim-cuda", device="cuda")  # fmt: skip
    except ShimkitError as exc:
        report["closure_error"] = str(exc)
        save()
        return 1
    report["compile_seconds"] = round(time.perf_counter() - start, 1)
    report["shape_warnings"] = compiled.shape_warnings
    save()
    slim = shimkit.runtime.load(pt2, device="cuda")
    conv_before = cuda_runtime().conv_counts()
    report["runs"] = []
    slim_outputs, eager_outputs = [], []
    with torch.no_grad():
        for inputs in input_sets:
            expected = model(*inputs)
            expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
            got = slim(*inputs)
            slim_outputs.append(got)
            eager_outputs.append(expected)
            run = {
                "input_shapes": [list(v.shape) for v in inputs],
                **compare(got, expected, zoo.rtol),
            }
            if not run["match"]:
                # What the compiled program itself gives (the blob's contract), for the cause.
                program = exported.module()(*inputs)
                program = list(program) if isinstance(program, (tuple, list)) else [program]
                run["exported_program_shapes"] = [list(t.shape) for t in program]
            report["runs"].append(run)
            save()
    if timed:
        report["timing"] = replay_and_timing(
            pt2, model, input_sets[0], eager_outputs[0], slim, zoo.rtol
        )
        save()
    slim.close()
    # Convolutions on cuDNN and on the host (the fallback), over every run.
    report["conv_on_cudnn_host"] = [
        after - before
        for after, before in zip(cuda_runtime().conv_counts(), conv_before, strict=True)
    ]
    report["match"] = all(r["match"] for r in report["runs"])
    save()
    # The peer: torch's runner on the same blob, against eager and against the slim runtime.
    peer = run_peer(pt2, input_sets, work, timed)
    if isinstance(peer, str):
        report["peer_error"] = peer
    else:
        if timed:
            timing = report["timing"]
            timing["torch_runner_us"] = peer["first_input_timing"]["us_per_run"]
            for side in ("eager", "replay"):
                ratio = timing[f"slim_{side}_us"] / timing["torch_runner_us"]
                timing[f"{side}_vs_torch"] = round(ratio, 2)
        for run, got, expected, theirs in zip(
            report["runs"], slim_outputs, eager_outputs, peer["outputs"], strict=True
        ):
            run["peer_vs_eager"] = compare([as_numpy(t) for t in theirs], expected, zoo.rtol)
            run["slim_vs_peer"] = compare(got, theirs, zoo.rtol)
        report["peer_matches_eager"] = all(r["peer_vs_eager"]["match"] for r in report["runs"])
        report["slim_matches_peer"] = all(r["slim_vs_peer"]["match"] for r in report["runs"])
    save()
    print(json.dumps(report))
    return 0 if report["match"] else 1


if __name__ == "__main__":
    sys.exit(main())
