"""Peak memory of the slim CPU runtime beyond a transformer block's weights (issue 11,
point 4: < 10 MB), and the GEMM library that keeps it there.

The GPT block of tests/models/zoo.py (3.0 MiB of weights) runs in shimkit-run-blob, the
smallest host (no Python, no libtorch); `bench.runtime_common.blob_memory` reports the
most the process held. 30 runs, not a few: the heap the shims' buffers left behind used
to grow run after run (tests/runtime/test_shims.py bounds that alone). What the block may
hold beyond its weights: libc, libstdc++, OpenBLAS and the shims' pages (~6.5 MiB), its
buffers and the heap (~1.5 MiB); not oneDNN's (~4 MiB): a model that does not convolve
keeps its GEMMs on OpenBLAS (docs/runtime.md, "Memory"), which the second test checks
against ResNet-18, which convolves and so opens oneDNN. The control of the bound is a
host that keeps its blob's bytes in memory (`--bytes`, +4.4 MiB).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shimkit.runtime.build import build_run_blob

from bench.runtime_common import blob_memory, extract_so

ROOT = Path(__file__).resolve().parents[2]
BOUND_MIB = 10.0
RUNS = 30


def beyond_weights_mib(report: dict[str, Any], weight_bytes: int) -> float:
    return (report["peak_kb"] * 1024 - weight_bytes) / 2**20


@pytest.fixture(scope="module")
def block(packages: Any, libs: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    pkg = packages("transformer_block")
    so = extract_so(pkg.prefixed, tmp_path_factory.mktemp("transformer_block"))
    return pkg, so, build_run_blob(libs)


@pytest.mark.parametrize("from_bytes", [False, True])
def test_block_peak_beyond_weights_is_under_10_mib(
    block: Any, from_bytes: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under 10 MiB beyond the weights; the control, a host holding the blob's bytes
    (one more copy of the file), is over."""
    pkg, so, run_blob = block
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # one thread, as bench_models
        monkeypatch.setenv(var, "1")
    monkeypatch.delenv("SHIMKIT_ONEDNN", raising=False)
    inputs = [t.numpy() for t in pkg.inputs]
    report = blob_memory(Path(run_blob), so, inputs, runs=RUNS, from_bytes=from_bytes)
    beyond = beyond_weights_mib(report, pkg.weight_bytes)
    assert (beyond < BOUND_MIB) == (not from_bytes), (beyond, report["memory"])


_LIBRARIES_OF_A_RUN = """
import sys
import numpy as np
import shimkit.runtime as rt

model = rt.load(sys.argv[1])
model(*[np.zeros([int(d) for d in shape.split("x")], np.float32) for shape in sys.argv[2:]])
print(any("libdnnl" in line for line in open("/proc/self/maps")))
"""


@pytest.mark.parametrize(
    ("name", "opens_onednn"), [("transformer_block", False), ("resnet18", True)]
)
def test_only_models_that_convolve_open_onednn(
    packages: Any, name: str, opens_onednn: bool
) -> None:
    """A fresh process runs the block: its GEMMs (all >= 1 MFLOP, oneDNN-sized) stay on
    OpenBLAS and libdnnl is never mapped. The control, ResNet-18, convolves: oneDNN is
    opened, and its classifier's GEMM runs there too."""
    pkg = packages(name)
    shapes = ["x".join(str(d) for d in t.shape) for t in pkg.inputs]
    env = {k: v for k, v in os.environ.items() if k != "SHIMKIT_ONEDNN"}
    proc = subprocess.run(
        [sys.executable, "-c", _LIBRARIES_OF_A_RUN, str(pkg.prefixed), *shapes],
        env={**env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(opens_onednn)
