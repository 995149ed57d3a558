"""An ATen-mode host (USE_ATEN_LIB, linked with libtorch) runs a real prefixed blob.

The host takes at::Tensor inputs, finds the slim backend in the shimkit::aten
registry and runs the blob through the slim runtime while libtorch is linked
into the same process. Built here with g++ (Bazel's //runtime:backend_aten_test
covers the Bazel build of the same variant).
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def aten_host(libs, tmp_path_factory: pytest.TempPathFactory, config) -> Path:
    out = tmp_path_factory.mktemp("aten-host") / "aten_host"
    tdir = Path(torch.__file__).parent
    lib_dir = libs.runtime.parent
    cmd = [
        "g++", "-std=c++20", "-O1", "-DUSE_ATEN_LIB", *config.flags,
        f"-I{ROOT}", f"-I{tdir / 'include'}",
        str(Path(__file__).with_name("aten_host.cpp")),
        str(ROOT / "runtime" / "backend_registry.cpp"),
        "-o", str(out), f"-L{lib_dir}", "-lshimkit_runtime", f"-Wl,-rpath,{lib_dir}",
        f"-L{tdir / 'lib'}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{tdir / 'lib'}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_aten_host_runs_blob_next_to_libtorch(aten_host: Path, cases, tmp_path: Path) -> None:
    case = cases["mlp"]
    with zipfile.ZipFile(case.pt2) as archive:
        blob = tmp_path / "mlp.so"
        blob.write_bytes(archive.read(next(n for n in archive.namelist() if n.endswith(".so"))))
    x = case.inputs[0]
    (tmp_path / "in.bin").write_bytes(np.ascontiguousarray(x, np.float32).tobytes())
    shape = "x".join(map(str, x.shape))
    proc = subprocess.run(
        [str(aten_host), str(blob), str(tmp_path / "out.bin"), str(tmp_path / "in.bin"), shape],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32).reshape(
        case.expected[0].shape
    )
    np.testing.assert_allclose(got, case.expected[0], rtol=1e-5, atol=1e-5)
    # libtorch really is in that process: the host links it.
    needed = subprocess.run(["ldd", str(aten_host)], capture_output=True, text=True).stdout
    assert "libtorch_cpu.so" in needed


def test_aten_host_refuses_unprefixed_blob(aten_host: Path, cases, tmp_path: Path) -> None:
    """Negative control: with libtorch right there, the unprefixed twin is refused."""
    case = cases["mlp_unprefixed"]
    with zipfile.ZipFile(case.pt2) as archive:
        blob = tmp_path / "twin.so"
        blob.write_bytes(archive.read(next(n for n in archive.namelist() if n.endswith(".so"))))
    (tmp_path / "in.bin").write_bytes(np.zeros(64, np.float32).tobytes())
    proc = subprocess.run(
        [str(aten_host), str(blob), str(tmp_path / "out.bin"), str(tmp_path / "in.bin"), "4x16"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert "unprefixed shim" in proc.stderr
