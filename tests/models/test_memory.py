"""Peak memory of the slim CPU runtime beyond a conv model's weights (issue 11, point 4).

ResNet-18 at 224x224 (46.8 MB of weights) runs in shimkit-run-blob, the smallest host (no
Python, no libtorch); `bench.runtime_common.blob_memory` reports the most the process held
(peak RSS, and the blob's memory-file pages RSS does not show). What it may hold beyond the
weights: the convolution weights once more, reordered into oneDNN's blocked layout (the
blob keeps raw pointers to its constants, so the plain copy cannot be dropped: see
docs/runtime.md), plus a fixed allowance for the libraries' pages (libdnnl, OpenBLAS,
libstdc++, libc: about 11 MB), activations and scratch. Loading used to hold the weights
three more times at once (a heap copy of the file, the memory file, the container's copy);
one such copy more fails the bound, which the control shows with a host that keeps its blob
in memory (`--bytes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shimkit.runtime.build import build_run_blob

from bench.runtime_common import blob_memory, extract_so

# Libraries' resident pages, activations, oneDNN scratch and the heap's slack, in MiB.
ALLOWANCE_MIB = 24.0


def beyond_weights_mib(report: dict[str, Any], weight_bytes: int) -> float:
    return (report["peak_kb"] * 1024 - weight_bytes) / 2**20


def within_bound(report: dict[str, Any], weight_bytes: int) -> bool:
    """Peak beyond the weights <= the packed weights (one more copy) + the allowance."""
    return beyond_weights_mib(report, weight_bytes) <= weight_bytes / 2**20 + ALLOWANCE_MIB


@pytest.fixture(scope="module")
def resnet18(packages: Any, libs: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    pkg = packages("resnet18")
    so = extract_so(pkg.prefixed, tmp_path_factory.mktemp("resnet18"))
    return pkg, so, build_run_blob(libs)


def test_resnet18_peak_beyond_weights_is_bounded(resnet18: Any) -> None:
    pkg, so, run_blob = resnet18
    report = blob_memory(Path(run_blob), so, [t.numpy() for t in pkg.inputs])
    beyond = beyond_weights_mib(report, pkg.weight_bytes)
    assert within_bound(report, pkg.weight_bytes), (
        f"peak {report['peak_kb'] / 1024:.1f} MiB is {beyond:.1f} MiB beyond "
        f"{pkg.weight_bytes / 2**20:.1f} MiB of weights: {report['memory']}"
    )
    # The memory file gave back its pages (constants, debug info): what is left of it is
    # the blob's code and tables, far below the weights.
    assert all(p["memfd_kb"] * 1024 < pkg.weight_bytes / 20 for p in report["memory"][1:])


def test_control_one_more_weights_copy_fails_the_bound(resnet18: Any) -> None:
    # A host that keeps the blob's bytes in memory holds the weights once more: the
    # check must see it.
    pkg, so, run_blob = resnet18
    report = blob_memory(Path(run_blob), so, [t.numpy() for t in pkg.inputs], from_bytes=True)
    assert not within_bound(report, pkg.weight_bytes), report["memory"]
