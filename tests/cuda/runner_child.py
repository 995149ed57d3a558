"""The CUDA runner in a process of its own (see test_cuda_runner.py).

A process may hold one shim provider only: the runner rightly refuses blobs
once another test has loaded the CPU shims globally into pytest's process.
So every check runs here, in a child that loads only the CUDA libraries, and
prints one JSON object:

    python runner_child.py RUNNER_SO load BLOB DEVICE   -> {"status", "message"} or {"loaded"}
    python runner_child.py RUNNER_SO info               -> {"device_count", "reason"}
    python runner_child.py RUNNER_SO cpu_path           -> the no-GPU checks' results
    python runner_child.py RUNNER_SO replay BLOB        -> the replay mode's states and results
                                                           (with the fake CUDA libraries)
    python runner_child.py RUNNER_SO replay_host BLOB   -> the same for the host-step blob
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from shimkit.config import load_config
from shimkit.runtime.blob import BlobSource
from shimkit.runtime.build import CUDA_SHIMS_LIB, RuntimeLibs
from shimkit.runtime.cuda import CudaModel, CudaRuntime, CudaRuntimeError, cuda_runtime


def open_blob(rt: CudaRuntime, blob: Path, device: int) -> CudaModel:
    """The runner's own checks only (no in-process linter: that is tested elsewhere)."""
    return CudaModel(BlobSource(blob, None, blob.read_bytes()), device, lint=False, runtime=rt)


def load(rt: CudaRuntime, blob: Path, device: int) -> dict[str, Any]:
    try:
        model = open_blob(rt, blob, device)
    except CudaRuntimeError as exc:
        return {"status": exc.status, "message": str(exc)}
    model.close()
    return {"loaded": True}


def cpu_path(rt: CudaRuntime) -> dict[str, Any]:
    """With CUDA unusable: CUDA requests fail with the reason, CPU tensors still work."""
    r: dict[str, Any] = {"reason": rt.unavailable_reason()}
    try:
        rt.h2d_bandwidth(1 << 20, pinned=True)
        r["bandwidth"] = "measured"
    except CudaRuntimeError as exc:
        r["bandwidth"] = exc.status
    config = load_config()
    shims = rt.lib  # the runner's handle reaches the shim library it depends on
    shims.shimkit_shim_last_error.restype = ctypes.c_char_p
    empty = getattr(shims, config.prefixed("aoti_torch_empty_strided"))
    delete = getattr(shims, config.prefixed("aoti_torch_delete_tensor_object"))
    numel = getattr(shims, config.prefixed("aoti_torch_get_numel"))
    sizes = (ctypes.c_int64 * 2)(3, 4)
    handle = ctypes.c_void_p()
    r["cpu_empty_rc"] = empty(2, sizes, None, 6, 0, -1, ctypes.byref(handle))
    n = ctypes.c_int64()
    r["cpu_numel_rc"] = numel(handle, ctypes.byref(n))
    r["cpu_numel"] = n.value
    r["cpu_delete_rc"] = delete(handle)
    r["cuda_empty_rc"] = empty(2, sizes, None, 6, 1, 0, ctypes.byref(handle))
    r["cuda_empty_error"] = shims.shimkit_shim_last_error().decode()
    return r


def graph_counter(name: str) -> int:
    fake = ctypes.CDLL(os.environ["SHIMKIT_CUDART"])
    fake.fake_cuda_graph_counter.restype = ctypes.c_long
    return int(fake.fake_cuda_graph_counter(name.encode()))


def replay(rt: CudaRuntime, blob: Path) -> dict[str, Any]:
    """Drives a fake blob (out = x @ x) through the replay mode: the state machine, the
    launches, a replay on new inputs (its product runs on the fake cuBLASLt, recorded into
    the graph at the capture), the eager paths and the clean-up."""
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((4, 4), dtype=np.float32) for _ in range(2))
    z = rng.standard_normal((3, 3), dtype=np.float32)
    model = open_blob(rt, blob, 0)
    model.use_graphs(True)
    r: dict[str, Any] = {"status_before": model.graph_status, "statuses": [], "x_ok": []}
    for _ in range(4):
        out = model(x)[0]
        r["statuses"].append(model.graph_status)
        r["x_ok"].append(bool(np.allclose(out, x @ x, atol=1e-5)))
    r["launches_after_x"] = graph_counter("launches")
    r["y_ok"] = bool(np.allclose(model(y)[0], y @ y, atol=1e-5))
    r["y_launched"] = graph_counter("launches") - r["launches_after_x"]
    launches = graph_counter("launches")
    r["z_ok"] = bool(np.allclose(model(z)[0], z @ z, atol=1e-5))  # another geometry
    r["z_launched"] = graph_counter("launches") - launches
    r["status_after"] = model.graph_status
    model.close()
    r["live_execs"] = graph_counter("execs")
    r["live_streams"] = graph_counter("streams")
    return r


def histc(x: np.ndarray, bins: int) -> np.ndarray:
    """torch.histc(x, bins) with min == max == 0: over x's own range."""
    return np.histogram(x, bins=bins, range=(float(x.min()), float(x.max())))[0].astype(np.float32)


def replay_host(rt: CudaRuntime, blob: Path) -> dict[str, Any]:
    """Drives the host-step blob (topk and histc of x, both host fallbacks) through the
    replay mode: the capture records the host steps, and each replay runs them on the new
    inputs. A replay whose host step fails (histc of a range that is not finite) fails the
    run with the op's error, and the model runs eagerly from then on."""
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((4, 4), dtype=np.float32) for _ in range(8)]

    def right(out: list[np.ndarray], x: np.ndarray) -> bool:
        return bool(
            np.array_equal(out[0], -np.sort(-x, axis=1)) and np.array_equal(out[1], histc(x, 4))
        )

    model = open_blob(rt, blob, 0)
    model.use_graphs(True)
    r: dict[str, Any] = {"statuses": [], "ok": []}
    # Run 1 eager, run 2 captured and replayed, runs 3-5 eager and replayed in turn (timed:
    # the runner's choice between them), then replay or eager as chosen; new inputs each run.
    for x in xs:
        r["ok"].append(right(model(x), x))
        r["statuses"].append(model.graph_status)
    r["launches"] = graph_counter("launches")
    r["replayed_work"] = graph_counter("replayed")
    bad = xs[0].copy()
    bad[1, 1] = np.inf
    try:
        model(bad)
        r["bad_run"] = "passed"
    except CudaRuntimeError as exc:
        r["bad_run"] = str(exc)
    r["status_after_bad"] = model.graph_status
    launches = graph_counter("launches")
    r["eager_after_bad_ok"] = right(model(xs[1]), xs[1])
    r["launched_after_bad"] = graph_counter("launches") - launches
    model.close()
    r["live_execs"] = graph_counter("execs")
    return r


def main() -> int:
    runner = Path(sys.argv[1])
    rt = cuda_runtime(RuntimeLibs(runner.with_name(CUDA_SHIMS_LIB), runner))
    command = sys.argv[2]
    if command == "load":
        result = load(rt, Path(sys.argv[3]), int(sys.argv[4]))
    elif command == "replay":
        result = replay(rt, Path(sys.argv[3]))
    elif command == "replay_host":
        result = replay_host(rt, Path(sys.argv[3]))
    elif command == "info":
        result = {"device_count": rt.device_count(), "reason": rt.unavailable_reason()}
    else:
        result = cpu_path(rt)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
