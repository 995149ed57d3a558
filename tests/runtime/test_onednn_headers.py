"""The shims build against any oneDNN headers, or none: oneDNN 2.x (the C API they
open at run time, libdnnl.so.2) is used, anything else leaves it out.

Consumers build shimkit's shims on their own machines (Bazel, CMake, the wheel): Debian
sid's Bazel 7 chroot has oneDNN 3.x headers, whose C API has no `*_desc_init`; a machine
without libdnnl-dev has none. In both cases the shim library must still build, and its
convolutions take the direct path (shims/conv_onednn.h).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["shims/onednn_api.cpp", "shims/conv_onednn.cpp", "shims/matmul_onednn.cpp"]


def _compile(tmp_path: Path, include_first: list[str]) -> set[str]:
    """Compile the oneDNN sources; the undefined symbols of the objects."""
    undefined: set[str] = set()
    for source in SOURCES:
        obj = tmp_path / (Path(source).stem + ".o")
        cmd = ["g++", "-std=c++17", "-c", *include_first, "-I", str(ROOT), str(ROOT / source)]
        subprocess.run([*cmd, "-o", str(obj)], check=True, capture_output=True, text=True)
        nm = subprocess.run(["nm", "-u", str(obj)], check=True, capture_output=True, text=True)
        undefined |= {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    return undefined


def _fake_headers(tmp_path: Path, major: int | None) -> list[str]:
    include = tmp_path / "include"
    (include / "oneapi" / "dnnl").mkdir(parents=True)
    # Found before the system's: with `major` None, a header that names no version.
    version = include / "oneapi" / "dnnl" / "dnnl_version.h"
    version.write_text("" if major is None else f"#define DNNL_VERSION_MAJOR {major}\n")
    return ["-I", str(include)]


def test_onednn_2_headers_build_the_run_time_loader(tmp_path: Path) -> None:
    if not Path("/usr/include/oneapi/dnnl/dnnl_version.h").is_file():
        pytest.fail("libdnnl-dev (oneDNN 2.x) is missing: make setup installs it")
    undefined = _compile(tmp_path, [])
    assert "dlopen" in undefined and "dlsym" in undefined, sorted(undefined)


@pytest.mark.parametrize("major", [3, None], ids=["onednn-3-headers", "no-version"])
def test_other_onednn_headers_build_without_onednn(tmp_path: Path, major: int | None) -> None:
    undefined = _compile(tmp_path, _fake_headers(tmp_path, major))
    # Negative of the test above: nothing of oneDNN's loader is compiled in.
    assert not {"dlopen", "dlsym"} & undefined, sorted(undefined)
