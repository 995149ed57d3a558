"""Helpers shared by the runtime benchmarks (bench_runtime.py, bench_models.py)."""

from __future__ import annotations

import itertools
import json
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def extract_so(pt2: Path, out_dir: Path) -> Path:
    """The blob of a one-blob .pt2, written to `out_dir/<pt2 stem>.so` (for torch's runner),
    with the proxy executor's op list beside it (`<pt2 stem>.json`, where torch's runner
    looks) when the blob calls ops through libtorch's proxy executor."""
    with zipfile.ZipFile(pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        path = out_dir / f"{pt2.stem}.so"
        path.write_bytes(archive.read(member))
        ops = member[: -len(".so")] + ".json"
        if ops in archive.namelist():
            path.with_suffix(".json").write_bytes(archive.read(ops))
    return path


def spec_of(arrays: list[np.ndarray]) -> list[str]:
    """shimkit-run-blob's input specs (f32:1x3x224x224 ...) for `arrays`."""
    kinds = {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32"}
    return [f"{kinds[a.dtype.name]}:{'x'.join(map(str, a.shape))}" for a in arrays]


def beyond_weights_mib(kb: int, weight_bytes: int) -> float:
    """A memory figure of `blob_memory`'s report (KiB) less the weights, in MiB."""
    return (kb * 1024 - weight_bytes) / 2**20


def blob_memory(
    run_blob: Path,
    blob_so: Path,
    inputs: list[np.ndarray],
    runs: int = 3,
    from_bytes: bool = False,
    stand_ins: Sequence[str] = (),
) -> dict[str, Any]:
    """shimkit-run-blob's report for `blob_so` (zero inputs shaped like `inputs`), plus
    `peak_kb`: the most memory the process held at any point we can see. `stand_ins`: the
    constants whose plain bytes the shims' packed copies may replace (as
    `shimkit.runtime.load` allows them from the package's wrapper source:
    `BlobSource.stand_ins`).

    RSS alone undercounts: pages of the blob's memory file that are not mapped in are held
    too (`held_kb` of a phase = RSS - RssShmem + every memfd page), and while the runtime
    stages the blob the memory file holds the whole file before anything maps it (start
    RSS + the file's size, + the caller's copy with `from_bytes`). `peak_kb` is the largest
    of the peak RSS (VmHWM), every phase's `held_kb` and that staging figure.

    `own_peak_kb` is that peak without the libraries' file-backed pages (libc, libstdc++,
    OpenBLAS, the shims: their code and tables): the anonymous and memory-file pages the
    process holds itself. How many library pages are resident is the kernel's to decide (it
    maps pages of its page cache around each fault): the same binary and blob held 0.5 MiB
    more of them on CI's VM than here, with the same anonymous pages. A peak inside a phase
    (buffers freed before its end) is seen only in VmHWM, with the library pages of that
    moment, which are at least those of the phase before (they only grow): so a phase's
    own peak is at most its VmHWM less the previous phase's file pages, plus the memory
    file's pages not mapped in. `own_peak_kb` is the largest of that bound, every phase's
    `held_kb - file_kb` and the staging figure's own part.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as names:
        names.write("".join(f"{fqn}\n" for fqn in stand_ins))
        names.flush()
        options = [*(["--bytes"] if from_bytes else []), f"--stand-ins={names.name}"]
        cmd = [str(run_blob), *options, str(blob_so), str(runs), *spec_of(inputs)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(run.stdout)
    phases = {p["phase"]: p for p in report["memory"]}
    file_kb = blob_so.stat().st_size // 1024
    staged_kb = phases["start"]["rss_kb"] + file_kb * (2 if from_bytes else 1)
    report["staged_kb"] = staged_kb
    report["peak_kb"] = max(
        report["max_rss_kb"], staged_kb, *(p["held_kb"] for p in report["memory"])
    )
    staged_own_kb = phases["start"]["anon_kb"] + file_kb * (2 if from_bytes else 1)
    memory = report["memory"]
    within_phase_kb = [
        p["peak_rss_kb"] - before["file_kb"] + p["memfd_kb"] - p["shmem_kb"]
        for before, p in itertools.pairwise(memory)
    ]
    report["own_peak_kb"] = max(
        staged_own_kb, *within_phase_kb, *(p["held_kb"] - p["file_kb"] for p in memory)
    )
    return report
