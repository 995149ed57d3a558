"""GPU probe: a loaded CUDA model called with torch CUDA tensors (inputs read in place,
outputs torch CUDA tensors, shimkit.runtime.device_memory) against the same model called with
host arrays, `CudaModel.bench` (device-resident, the runner's floor) and the eager torch module,
same process, synchronised after every call.

Checks on the way, each printed: outputs of the device path are torch CUDA tensors on the
model's device equal to the host path's (bit for bit) and to the torch module's (1e-4 of
scale); an output survives the next call; inputs produced by slow work on a side stream,
current at the call, are waited for; bfloat16, int64 and bool outputs come through. Prints
one JSON line per model and mode; figures in docs/benchmarks.md. Needs the slim CUDA libraries
(tools/gpu/build_cuda_libs.py) in $SHIMKIT_LIB_DIR and this checkout's lint/ on PYTHONPATH.

    python3 tools/gpu/probe_device_io.py
"""

from __future__ import annotations

import cProfile
import json
import pstats
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
from shimkit.runtime.device_memory import torch_tensor
from step_profile import synced_us

MODELS = {
    # Small: call overhead dominates.
    "mlp": """
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(
                    torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512))
            def forward(self, x):
                return self.net(x)
        model = Model()
        example_inputs = (torch.randn(64, 512, generator=g),)
    """,
    # Large inputs and outputs (32 MB in, 16 MB out): what the host path copies.
    "igammac_4m": """
        class Model(torch.nn.Module):
            def forward(self, a, x):
                return torch.igammac(a, x)
        model = Model()
        example_inputs = (torch.rand(4 << 20, generator=g) * 50 + 0.05,
                          torch.rand(4 << 20, generator=g) * 100)
    """,
    # Outputs of other dtypes.
    "dtypes": """
        class Model(torch.nn.Module):
            def forward(self, x):
                y = torch.tanh(x) * 3
                return y.to(torch.bfloat16), y.argmax(-1), y > 0
        model = Model()
        example_inputs = (torch.randn(256, 1000, generator=g),)
    """,
}


class DLPackOnly:
    """A tensor seen through DLPack alone (no __cuda_array_interface__)."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def __dlpack_device__(self) -> tuple[int, int]:
        return tuple(self.tensor.__dlpack_device__())

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.tensor.__dlpack__(stream=stream)


def load_source(path: Path) -> tuple[Any, tuple[Any, ...]]:
    namespace: dict[str, Any] = {}
    exec(path.read_text(), namespace)
    return namespace["model"], namespace["example_inputs"]


def same(got: Any, want: np.ndarray) -> bool:
    """Bit for bit (bfloat16 compared as int16: numpy's bfloat16 is ml_dtypes')."""
    if got.dtype == torch.bfloat16:
        got, want = got.view(torch.int16), want.view(np.int16)
    return bool(torch.equal(got.cpu(), torch.from_numpy(np.ascontiguousarray(want))))


def close_to(got: Any, want: Any) -> float:
    got, want = got.float().cpu(), want.float().cpu()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def checks(model: Any, module: Any, inputs: tuple[Any, ...]) -> dict[str, object]:
    cuda_in = [value.cuda() for value in inputs]
    host_in = [value.numpy() for value in inputs]
    out = model(*cuda_in)
    host_out = model(*host_in)
    with torch.no_grad():
        eager = module.cuda()(*cuda_in)
    eager = list(eager) if isinstance(eager, tuple) else [eager]
    row: dict[str, object] = {
        "types": sorted({type(o).__name__ for o in out}),
        "devices": sorted({str(o.device) for o in out}),
        "dtypes": [str(o.dtype).removeprefix("torch.") for o in out],
        "equal_to_host_path": all(same(o, h) for o, h in zip(out, host_out, strict=True)),
        "float_error_vs_torch": max(
            (close_to(o, e) for o, e in zip(out, eager, strict=True) if o.is_floating_point()),
            default=0.0,
        ),
    }
    # DLPack's protocol as torch speaks it (__dlpack_device__, then __dlpack__ with torch's
    # stream): the same memory as the DeviceTensor's, equal to the host path.
    through_protocol = [torch.from_dlpack(o) for o in model.run_device(*cuda_in)]
    row["from_dlpack_equal"] = all(
        same(o, h) for o, h in zip(through_protocol, host_out, strict=True)
    )
    # Inputs through DLPack only (as JAX hands arrays over): torch exports them for the
    # legacy default stream, the run reads them in place.
    via_dlpack = model.run_device(*[DLPackOnly(v) for v in cuda_in])
    row["dlpack_inputs_equal"] = all(
        same(torch_tensor(o), h) for o, h in zip(via_dlpack, host_out, strict=True)
    )
    # An output survives the next call (with other inputs).
    first = out[0].clone()
    model(*[v * 2 if v.is_floating_point() else v for v in cuda_in])
    row["survives_next_call"] = bool(torch.equal(out[0], first))
    # Inputs made on a side stream behind slow work, the call made on that stream (torch's
    # rule: work is ordered on the current stream): the call must wait for them.
    side = torch.cuda.Stream()
    busy = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(20):
            busy = busy @ busy / 64
        late = [v * 1.0 if v.is_floating_point() else v.clone() for v in cuda_in]
        late_out = model(*late)
    torch.cuda.synchronize()
    row["waits_for_side_stream"] = all(
        torch.equal(a, b) for a, b in zip(late_out, model(*cuda_in), strict=True)
    )
    return row


def host_us(call: Any, reps: int = 2000) -> float:
    """Mean host time of `call()` in us (no GPU wait: the Python side alone)."""
    call()
    start = time.perf_counter()
    for _ in range(reps):
        call()
    return (time.perf_counter() - start) / reps * 1e6


def breakdown(model: Any, cuda_in: list[Any]) -> dict[str, object]:
    """Where a device-path call's host time goes: reading the inputs, torch's current
    stream, wrapping each output as a torch tensor (DLPack, and the CUDA array interface
    it replaced), and the call's profile (cumulative us per call, the top entries)."""
    outs = model.run_device(*cuda_in)
    plain = [o for o in outs if o.dtype_name != "bfloat16"]  # the interface has no bfloat16
    row: dict[str, object] = {
        "inputs_us": host_us(lambda: model._device_inputs(cuda_in)),
        "current_stream_us": host_us(lambda: torch.cuda.current_stream(0).cuda_stream),
        "wrap_dlpack_us_per_output": host_us(lambda: [torch_tensor(o) for o in outs]) / len(outs),
        "wrap_interface_us_per_output": host_us(
            lambda: [torch.as_tensor(o, device="cuda") for o in plain]
        )
        / max(len(plain), 1),
    }
    reps = 300
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(reps):
        model(*cuda_in)
    profiler.disable()
    entries = sorted(pstats.Stats(profiler).stats.items(), key=lambda kv: -kv[1][3])
    row["profile_cumulative_us"] = [
        f"{func[2]} ({Path(func[0]).name}:{func[1]}) {stat[3] / reps * 1e6:.1f}"
        for func, stat in entries[:14]
    ]
    return row


def probe(work: Path, name: str, body: str) -> list[dict[str, object]]:
    source, package = work / f"{name}.py", work / f"{name}.pt2"
    # Seeded: the weights the package froze and the module compared with are the same.
    source.write_text("import torch\ntorch.manual_seed(0)\ng = torch.Generator().manual_seed(0)\n" +
                      textwrap.dedent(body))  # fmt: skip
    compiled = subprocess.run(
        [sys.executable, "-m", "shimkit", "compile", str(source), "-o", str(package),
         "--device", "cuda", "--force"],
        capture_output=True, text=True,
    )  # fmt: skip
    if compiled.returncode:
        return [{"model": name, "compile_error": (compiled.stdout + compiled.stderr)[-2000:]}]
    module, inputs = load_source(source)
    module = module.eval().cuda()
    rows = []
    for graphs in (False, True):
        model = shimkit.runtime.load(package, device="cuda", graphs=graphs)
        try:
            row: dict[str, object] = {"model": name, "graphs": graphs}
            for _ in range(3):
                model(*[value.cuda() for value in inputs])  # warm up (and capture)
            row.update(checks(model, module, inputs))
            cuda_in = [value.cuda() for value in inputs]
            host_in = [value.numpy() for value in inputs]
            reps = 50 if name == "igammac_4m" else 300
            row["device_path_us"] = synced_us(torch, lambda m=model, c=cuda_in: m(*c), reps)
            # The same without wrapping the outputs as torch tensors (DeviceTensors out).
            row["run_device_us"] = synced_us(
                torch, lambda m=model, c=cuda_in: m.run_device(*c), reps
            )
            row.update(breakdown(model, cuda_in))
            row["host_path_us"] = synced_us(torch, lambda m=model, h=host_in: m(*h), reps)
            row["bench_floor_us"] = model.bench(*host_in, iterations=reps) / 1e3
            with torch.no_grad():
                row["torch_eager_us"] = synced_us(torch, lambda c=cuda_in: module(*c), reps)
            row["graph_status"] = model.graph_status
        except Exception as exc:  # reported; the next mode still runs
            row["error"] = f"{type(exc).__name__}: {exc}"[-2000:]
        finally:
            model.close()
        rows.append(row)
    return rows


def main() -> int:
    names = sys.argv[1:] or list(MODELS)
    with tempfile.TemporaryDirectory(prefix="probe-device-io-") as work:
        for name in names:
            for row in probe(Path(work), name, MODELS[name]):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
