"""CUDA from the package, as a user reaches it: `shimkit.runtime.load(path, device="cuda")`
(eager and with CUDA-graph replay), `shimkit run` and `shimkit probe` on a CUDA blob, with
the fake CUDA libraries (tests/cuda/fake) and a fake CUDA blob (out = x @ x); and, with no
GPU here, one clear line instead. Each check runs in a child process: the shims read their
environment once, and a process holds one slim shim provider (CPU or CUDA).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.cuda.conftest import fake_env

ROOT = Path(__file__).resolve().parents[2]

LOAD_AND_RUN = """
import json, sys
import numpy as np
import shimkit.runtime
blob, graphs = sys.argv[1], sys.argv[2] == "graphs"
x = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
model = shimkit.runtime.load(blob, device="cuda", graphs=graphs)
r = {"device": model.device, "statuses": [], "ok": []}
for i in range(3):
    y = model(x * (i + 1))[0]
    r["ok"].append(bool(np.allclose(y, (x * (i + 1)) @ (x * (i + 1)), atol=1e-5)))
    r["statuses"].append(model.graph_status)
r["bench_ns"] = model.bench(x, iterations=5)
model.close()
try:
    model(x)
except Exception as exc:
    r["closed"] = str(exc)
print(json.dumps(r))
"""


def child(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT / "lint"), **env)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full
    )


def shimkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return child("from shimkit.cli import main; raise SystemExit(main())", *args, env=env)


def with_fakes(cuda_libs: dict[str, Path], fakes: dict[str, Path], **env: str) -> dict[str, str]:
    return {"SHIMKIT_LIB_DIR": str(cuda_libs["runner"].parent), **fake_env(fakes), **env}


def result(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    parsed: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return parsed


def test_load_on_cuda_runs_eagerly_and_with_graph_replay(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    env = with_fakes(cuda_libs, fakes)
    eager = result(child(LOAD_AND_RUN, str(fake_blob), "eager", env=env))
    assert eager["device"] == "cuda:0" and all(eager["ok"]) and eager["bench_ns"] > 0
    assert eager["statuses"] == ["off"] * 3
    assert "model is closed" in eager["closed"]
    replayed = result(child(LOAD_AND_RUN, str(fake_blob), "graphs", env=env))
    assert replayed["statuses"] == ["warmed up", "replaying", "replaying"]
    # The fake runtime computes at issue, so the replays' results come from the captured
    # run; what the real GPU recomputes is checked there (tools/gpu, step slim).
    assert replayed["ok"][:2] == [True, True]
    # Control: with capture refused, replay gives up with the reason and stays correct.
    refused = result(
        child(LOAD_AND_RUN, str(fake_blob), "graphs", env={**env, "FAKE_CUDA_NO_CAPTURE": "1"})
    )
    assert refused["statuses"][1].startswith("eager: capture: ") and all(refused["ok"])


def test_shimkit_run_picks_cuda_for_a_cuda_blob(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path, tmp_path: Path
) -> None:
    x = np.random.default_rng(2).standard_normal((5, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = with_fakes(cuda_libs, fakes)
    argv = [str(fake_blob), "--input", str(tmp_path / "x.npy")]
    done = shimkit("run", *argv, "--save-dir", str(tmp_path / "out"), "--format", "json", env=env)
    assert (result(done)["device"], result(done)["math"]) == ("cuda:0", "float32")
    np.testing.assert_allclose(np.load(tmp_path / "out" / "out0.npy"), x @ x, atol=1e-5)
    # torch's default math on request: the library reports TF32 convolutions allowed.
    tf32 = shimkit("run", *argv, "--tf32", "--format", "json", env=env)
    assert result(tf32)["math"] == "TF32 convolutions"
    # TF32 matmuls on request: the fake cuBLASLt reads its operands as TF32 only when the
    # shims ask for that compute type, so the product moves off x @ x.
    saved = tmp_path / "tf32"
    matmul = shimkit(
        "run", *argv, "--tf32-matmul", "--save-dir", str(saved), "--format", "json", env=env
    )
    assert result(matmul)["math"] == "TF32 matmuls"
    got, tx = np.load(saved / "out0.npy"), tf32_round(x)
    np.testing.assert_allclose(got, tx @ tx, atol=1e-5)
    assert np.abs(got - x @ x).max() > 1e-4  # control: not the float32 product
    timed = shimkit("run", *argv, "--graphs", "--repeat", "3", "--device", "cuda:0", env=env)
    assert timed.returncode == 0 and "latency:" in timed.stdout, timed.stderr
    # Control: forced onto the (checkout-built) CPU runtime, the CUDA blob is refused in one
    # line.
    cpu = shimkit("run", *argv, "--device", "cpu", env=fake_env(fakes))
    assert cpu.returncode != 0
    assert (
        cpu.stderr.strip()
        == f"shimkit: error: {fake_blob}: built for CUDA; load it with device='cuda'"
    )
    cpu_tf32 = shimkit("run", *argv, "--device", "cpu", "--tf32", env=fake_env(fakes))
    assert (
        cpu_tf32.stderr.strip()
        == f"shimkit: error: {fake_blob}: --tf32 is for CUDA (this runs on cpu)"
    )
    cpu_matmul = shimkit("run", *argv, "--device", "cpu", "--tf32-matmul", env=fake_env(fakes))
    assert (
        cpu_matmul.stderr.strip()
        == f"shimkit: error: {fake_blob}: --tf32-matmul is for CUDA (this runs on cpu)"
    )


def tf32_round(x: np.ndarray) -> np.ndarray:
    """float32 values as TF32 holds them: 10 mantissa bits, rounded to nearest even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return bits.astype(np.uint32).view(np.float32)


def test_shimkit_probe_shows_a_cuda_blob_bound_to_the_slim_cuda_shims(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    pytest.importorskip("torch")
    report = result(
        shimkit("probe", str(fake_blob), "--format", "json", env=with_fakes(cuda_libs, fakes))
    )
    assert report["device"] == "cuda" and report["ok"] and report["loaded_by_runtime"]
    assert report["libtorch"] and report["provider"] == os.path.realpath(cuda_libs["shims"])
    assert len(report["bindings"]) == 6
    assert {b["library"] for b in report["bindings"]} == {report["provider"]}


def test_without_a_gpu_every_entry_point_says_so_in_one_line(
    cuda_libs: dict[str, Path], fake_blob: Path, tmp_path: Path
) -> None:
    env = {"SHIMKIT_LIB_DIR": str(cuda_libs["runner"].parent)}
    info = child(
        "from shimkit.runtime.cuda import cuda_runtime; rt = cuda_runtime(); "
        "print(rt.device_count()); print(rt.unavailable_reason())",
        env=env,
    )
    count, reason = info.stdout.splitlines()[:2]
    if int(count) >= 0:
        pytest.skip("this machine has a usable GPU")
    np.save(tmp_path / "x.npy", np.ones((2, 2), np.float32))
    for argv in (
        ["run", str(fake_blob), "--input", str(tmp_path / "x.npy")],
        ["probe", str(fake_blob), "--no-libtorch"],
    ):
        done = shimkit(*argv, env=env)
        assert done.returncode != 0
        assert done.stderr.strip() == f"shimkit: error: {fake_blob}: CUDA unavailable: {reason}"
    api = child(
        "import sys, shimkit.runtime\n"
        "try:\n    shimkit.runtime.load(sys.argv[1], device='cuda')\n"
        "except Exception as e:\n    print(type(e).__name__, e.status, e)\n",
        str(fake_blob),
        env=env,
    )
    assert api.stdout.strip() == (
        f"CudaRuntimeError SHIMKIT_E_DEVICE {fake_blob}: CUDA unavailable: {reason}"
    )


def test_one_process_holds_the_cpu_or_the_cuda_runtime(cuda_libs: dict[str, Path]) -> None:
    code = (
        "from pathlib import Path\n"
        "from shimkit.runtime.build import RuntimeLibs\n"
        "from shimkit.runtime.capi import runtime_lib\n"
        "from shimkit.runtime.cuda import cuda_runtime\n"
        "runtime_lib()\n"
        "try:\n"
        f"    cuda_runtime(RuntimeLibs(Path({str(cuda_libs['shims'])!r}), "
        f"Path({str(cuda_libs['runner'])!r})))\n"
        "except Exception as e:\n    print(e)\n"
    )
    done = child(code, env={})
    assert done.returncode == 0, done.stderr
    assert "already loaded the slim CPU runtime" in done.stdout
    assert "run CUDA blobs in another process" in done.stdout
