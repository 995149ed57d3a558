"""shimkit_model_load_file through shimkit-run-blob: the file is copied into the runtime's
memory file in the kernel (no copy in the process), vetted there, and its errors name it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from shimkit.runtime.build import build_run_blob

from bench.runtime_common import extract_so, spec_of


def _run(libs: Any, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(build_run_blob(libs)), *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_file_and_bytes_load_the_same_blob(libs: Any, cases: Any, tmp_path: Path) -> None:
    case = cases["convnet_cl"]
    so = extract_so(case.pt2, tmp_path)
    for extra in ([], ["--bytes"]):
        proc = _run(libs, *extra, str(so), "2", *spec_of(case.inputs))
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        phases = [p["phase"] for p in report["memory"]]
        assert phases == ["start", "load", "first_run", "runs"]
        # The memory file keeps only the blob's code and tables once loaded.
        assert report["memory"][-1]["memfd_kb"] * 1024 <= so.stat().st_size


def test_not_a_regular_file(libs: Any, tmp_path: Path) -> None:
    proc = _run(libs, str(tmp_path), "0")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{tmp_path}: cannot read: not a regular file"


def test_missing_file(libs: Any, tmp_path: Path) -> None:
    # Control: the open itself fails before anything is staged.
    missing = tmp_path / "none.so"
    proc = _run(libs, str(missing), "0")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{missing}: cannot open: No such file or directory"
