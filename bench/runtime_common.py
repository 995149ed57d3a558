"""Helpers shared by the runtime benchmarks (bench_runtime.py, bench_models.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np


def extract_so(pt2: Path, out_dir: Path) -> Path:
    """The blob of a one-blob .pt2, written to `out_dir/<pt2 stem>.so` (for torch's runner)."""
    with zipfile.ZipFile(pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        path = out_dir / f"{pt2.stem}.so"
        path.write_bytes(archive.read(member))
    return path


def spec_of(arrays: list[np.ndarray]) -> list[str]:
    """shimkit-run-blob's input specs (f32:1x3x224x224 ...) for `arrays`."""
    kinds = {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32"}
    return [f"{kinds[a.dtype.name]}:{'x'.join(map(str, a.shape))}" for a in arrays]
