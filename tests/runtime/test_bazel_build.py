"""The Bazel-built runtime (//runtime:libshimkit_runtime.so) runs a real blob."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bazel_runtime_runs_mlp(cases, run_shimkit, tmp_path: Path) -> None:
    if shutil.which("bazel") is None:
        pytest.fail("bazel is not installed: run tools/bootstrap.sh")
    proc = subprocess.run(
        ["bazel", "build", "//runtime:libshimkit_runtime.so"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lib_dir = ROOT / "bazel-bin" / "runtime"
    case = cases["mlp"]
    x = tmp_path / "x.npy"
    np.save(x, case.inputs[0])
    run = run_shimkit(
        ["run", str(case.pt2), "--input", str(x), "--save-dir", str(tmp_path)],
        env={"SHIMKIT_LIB_DIR": str(lib_dir)},
    )
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(
        np.load(tmp_path / "out0.npy"), case.expected[0], rtol=1e-5, atol=1e-5
    )
    probe = run_shimkit(["probe", str(case.pt2)], env={"SHIMKIT_LIB_DIR": str(lib_dir)})
    assert probe.returncode == 0, probe.stderr
    provider = next(line for line in probe.stdout.splitlines() if line.startswith("provider:"))
    assert "bazel-out" in provider or "_solib" in provider, provider  # Bazel's shim library


def test_lib_dir_without_runtime_is_one_line_error(cases, run_shimkit, tmp_path: Path) -> None:
    run = run_shimkit(
        ["run", str(cases["mlp"].pt2), "--zeros"], env={"SHIMKIT_LIB_DIR": str(tmp_path)}
    )
    assert run.returncode == 1
    assert "libshimkit_runtime.so: not found" in run.stderr
