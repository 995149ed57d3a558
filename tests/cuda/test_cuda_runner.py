"""The CUDA runner's bad-input paths, on this machine (CI has no GPU).

Blobs are vetted before anything is loaded: a CPU blob is refused as built
for another device, an unprefixed one as binding to libtorch, garbage as not
ELF; with no GPU or driver every CUDA request fails with the reason, and the
CPU path of the same shim library keeps working. Each check runs the runner
in a child process (runner_child.py) holding only the CUDA libraries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from shimkit.config import load_config
from shimkit.runtime.build import find_libraries

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

ENTRY_POINTS = """
int AOTInductorModelContainerCreateWithDevice(void) { return 1; }
int AOTInductorModelContainerDelete(void) { return 0; }
int AOTInductorModelContainerRun(void) { return 1; }
int AOTInductorModelContainerGetNumInputs(void) { return 0; }
int AOTInductorModelContainerGetNumOutputs(void) { return 0; }
"""


def fake_blob(tmp_path: Path, name: str, imports: list[str]) -> bytes:
    """A shared object with the AOTInductor entry points that calls `imports`."""
    decls = "".join(f"extern int {n}();\n" for n in imports)
    calls = "".join(f"  {n}();\n" for n in imports)
    source = tmp_path / f"{name}.c"
    source.write_text(f"{decls}{ENTRY_POINTS}int use_imports(void) {{\n{calls}  return 0;\n}}\n")
    out = tmp_path / f"{name}.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-z,noexecstack", str(source), "-o", str(out)], check=True
    )
    return out.read_bytes()


class RunnerError(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class ChildRunner:
    """The runner, driven in a fresh child process per call (tests/cuda/runner_child.py)."""

    def __init__(self, runner_so: Path) -> None:
        self.runner_so = runner_so

    def ask(self, *args: str) -> dict[str, Any]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "lint"), env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, str(HERE / "runner_child.py"), str(self.runner_so), *args],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def device_count(self) -> int:
        return int(self.ask("info")["device_count"])

    def unavailable_reason(self) -> str:
        return str(self.ask("info")["reason"])


@pytest.fixture(scope="module")
def runtime(cuda_libs: dict[str, Path]) -> ChildRunner:
    return ChildRunner(cuda_libs["runner"])


def load_error(rt: ChildRunner, blob: bytes, device: int = 0) -> RunnerError:
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(blob)
        f.flush()
        result = rt.ask("load", f.name, str(device))
    assert "status" in result, f"the blob was loaded: {result}"
    return RunnerError(result["status"], result["message"])


def test_another_provider_in_the_process_is_refused(
    cuda_libs: dict[str, Path], tmp_path: Path
) -> None:
    # Why the checks run in a child: with the CPU shims global in the same process,
    # the runner refuses (two providers of the same prefixed names), which this
    # process reproduces on purpose, behind the Python layer's back (a raw dlopen).
    cpu_shims = find_libraries().shims
    code = (
        "import ctypes, os, sys\n"
        "from pathlib import Path\n"
        "from shimkit.runtime.blob import read_blob\n"
        "from shimkit.runtime.build import RuntimeLibs\n"
        "from shimkit.runtime.cuda import CudaModel, CudaRuntimeError, cuda_runtime\n"
        f"ctypes.CDLL({str(cpu_shims)!r}, mode=os.RTLD_GLOBAL)\n"
        f"rt = cuda_runtime(RuntimeLibs(Path({str(cuda_libs['shims'])!r}), "
        f"Path({str(cuda_libs['runner'])!r})))\n"
        "try:\n    CudaModel(read_blob(sys.argv[1]), 0, lint=False, runtime=rt)\n"
        "except CudaRuntimeError as e:\n    print(e.status, e)\n"
    )
    config = load_config()
    blob = tmp_path / "b.so"
    blob.write_bytes(
        fake_blob(tmp_path, "cuda", [config.prefixed("aoti_torch_create_cuda_stream_guard")])
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "lint")
    done = subprocess.run(
        [sys.executable, "-c", code, str(blob)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "SHIMKIT_E_MISSING_SHIM" in done.stdout and str(cpu_shims) in done.stdout


def test_cpu_blob_is_refused_as_wrong_device(runtime: ChildRunner, tmp_path: Path) -> None:
    config = load_config()
    blob = fake_blob(tmp_path, "cpu", [config.prefixed("aoti_torch_empty_strided")])
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_DEVICE"
    assert "built for the CPU" in str(err)


def test_unprefixed_blob_is_refused(runtime: ChildRunner, tmp_path: Path) -> None:
    blob = fake_blob(tmp_path, "bare", ["aoti_torch_create_cuda_stream_guard"])
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_MISSING_SHIM"
    assert "unprefixed shim aoti_torch_create_cuda_stream_guard" in str(err)


def test_shim_we_do_not_provide_is_refused(runtime: ChildRunner, tmp_path: Path) -> None:
    config = load_config()
    missing = config.prefixed("aoti_torch_cuda__fft_c2c")
    blob = fake_blob(
        tmp_path, "fft", [config.prefixed("aoti_torch_create_cuda_stream_guard"), missing]
    )
    err = load_error(runtime, blob)
    assert err.status == "SHIMKIT_E_MISSING_SHIM"
    assert missing in str(err)


def test_garbage_and_truncated_blobs(runtime: ChildRunner, tmp_path: Path) -> None:
    assert load_error(runtime, b"not an elf").status == "SHIMKIT_E_BAD_BLOB"
    config = load_config()
    blob = fake_blob(tmp_path, "cut", [config.prefixed("aoti_torch_create_cuda_stream_guard")])
    assert load_error(runtime, blob[:200]).status == "SHIMKIT_E_BAD_BLOB"


def test_cuda_blob_without_gpu_or_with_bad_index(runtime: ChildRunner, tmp_path: Path) -> None:
    config = load_config()
    blob = fake_blob(tmp_path, "cuda", [config.prefixed("aoti_torch_create_cuda_stream_guard")])
    count = runtime.device_count()
    if count < 0:
        err = load_error(runtime, blob)
        assert err.status == "SHIMKIT_E_DEVICE"
        assert "CUDA unavailable" in str(err) and runtime.unavailable_reason() in str(err)
    else:
        err = load_error(runtime, blob, device=count)
        assert err.status == "SHIMKIT_E_DEVICE" and "out of range" in str(err)
    err = load_error(runtime, blob, device=-1)
    assert err.status == "SHIMKIT_E_DEVICE"


def test_no_gpu_means_clear_errors_and_a_working_cpu_path(runtime: ChildRunner) -> None:
    if runtime.device_count() >= 0:
        pytest.skip("this machine has a usable GPU")
    r = runtime.ask("cpu_path")
    assert "CUDA" in r["reason"]
    assert r["bandwidth"] == "SHIMKIT_E_DEVICE"
    # The CPU shims in the same library still allocate and copy.
    cpu = (r["cpu_empty_rc"], r["cpu_numel_rc"], r["cpu_numel"], r["cpu_delete_rc"])
    assert cpu == (0, 0, 12, 0)
    # And a CUDA tensor is refused with the reason.
    assert r["cuda_empty_rc"] != 0
    assert r["reason"] in r["cuda_empty_error"]
