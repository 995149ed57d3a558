"""`shimkit probe` and `shimkit run` end to end (subprocesses, real blobs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def test_probe_prefixed_blob_binds_only_to_slim_shims(cases, run_shimkit) -> None:
    proc = run_shimkit(["probe", str(cases["mlp"].pt2), "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["loaded_by_runtime"] and report["ran"]
    assert report["libtorch"] and report["libtorch"].endswith("libtorch_cpu.so")
    libraries = {b["library"] for b in report["bindings"]}
    assert libraries == {report["provider"]}
    assert len(report["bindings"]) >= 21  # every shim a CPU blob imports


def test_probe_negative_control_unprefixed_blob(cases, run_shimkit) -> None:
    proc = run_shimkit(["probe", str(cases["mlp_unprefixed"].pt2), "--format", "json"])
    assert proc.returncode == 8, proc.stderr
    report = json.loads(proc.stdout)
    assert not report["ok"] and not report["loaded_by_runtime"]
    assert report["lint_errors"] and report["lint_errors"][0].startswith("SK001")
    libraries = {b["library"] for b in report["bindings"]}
    assert libraries == {report["libtorch"]}, "unprefixed imports should bind to libtorch"


def test_probe_text_output(cases, run_shimkit) -> None:
    proc = run_shimkit(["probe", str(cases["topk"].pt2)])
    assert proc.returncode == 0, proc.stderr
    assert "0 to libtorch" in proc.stdout and proc.stdout.rstrip().endswith("PASS")


def test_run_writes_outputs(cases, run_shimkit, tmp_path: Path) -> None:
    case = cases["topk"]
    x = tmp_path / "x.npy"
    np.save(x, case.inputs[0])
    proc = run_shimkit(
        ["run", str(case.pt2), "--input", str(x), "--save-dir", str(tmp_path / "out")]
    )
    assert proc.returncode == 0, proc.stderr
    assert "output 1: int64 [3, 5]" in proc.stdout
    for i, want in enumerate(case.expected):
        np.testing.assert_allclose(
            np.load(tmp_path / "out" / f"out{i}.npy"), want, rtol=1e-5, atol=1e-5
        )


def test_run_bad_input_is_one_line(cases, run_shimkit, tmp_path: Path) -> None:
    bad = tmp_path / "x.npy"
    bad.write_text("not numpy")
    proc = run_shimkit(["run", str(cases["mlp"].pt2), "--input", str(bad)])
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr


def test_run_wrong_shape_is_one_line(cases, run_shimkit, tmp_path: Path) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 2), np.float32))
    proc = run_shimkit(["run", str(cases["mlp"].pt2), "--input", str(x)])
    assert proc.returncode == 1
    assert "expected shape [4, 16], got [2, 2]" in proc.stderr


def test_run_rejects_unprefixed_blob(cases, run_shimkit) -> None:
    proc = run_shimkit(["run", str(cases["mlp_unprefixed"].pt2), "--zeros"])
    assert proc.returncode == 1
    assert "rejected by the linter: SK001" in proc.stderr
