"""Runtime test fixtures: built libraries, compiled blobs, libtorch in global scope.

Every test here runs in a process where libtorch_cpu.so is loaded with
RTLD_GLOBAL, the worst case for symbol binding: a blob that imported an
unprefixed shim would bind to libtorch.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import pytest
from shimkit.config import ShimConfig
from shimkit.runtime.build import RuntimeLibs, build

from tests.runtime.blobs import TEST_CASES, BlobCase, build_case

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def libtorch_global() -> Path:
    import torch

    path = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    return path


@pytest.fixture(scope="session")
def libs(libtorch_global: Path) -> RuntimeLibs:
    return build("release")


@pytest.fixture(scope="session")
def cases(libs: RuntimeLibs) -> dict[str, BlobCase]:
    return {name: build_case(name) for name in TEST_CASES}


@pytest.fixture(scope="session")
def shims(libs: RuntimeLibs, config: ShimConfig) -> ctypes.CDLL:
    """The shim library, for calling shims directly (prefixed names)."""
    return ctypes.CDLL(str(libs.shims))


@pytest.fixture(scope="session")
def fake_blob_dir(tmp_path_factory: pytest.TempPathFactory, config: ShimConfig) -> Path:
    """Tiny gcc-built .so files that look like blobs in one respect each."""
    out = tmp_path_factory.mktemp("fake-blobs")
    entries = "".join(
        f'extern "C" __attribute__((visibility("default"))) int AOTInductorModelContainer{n}()'
        " { return 0; }\n"
        for n in ("CreateWithDevice", "Delete", "Run", "GetNumInputs", "GetNumOutputs")
    )
    missing_shim = config.prefixed("aoti_torch_cpu_cholesky_solve")
    sources = {
        "no_entries": 'extern "C" int helper() { return 1; }\n',
        "missing_shim": entries
        + f'extern "C" int {missing_shim}(void*);\n'
        + f'extern "C" int use() {{ return {missing_shim}(0); }}\n',
        "unprefixed": entries
        + 'extern "C" int aoti_torch_get_dim(void*, long*);\n'
        + 'extern "C" int use() { return aoti_torch_get_dim(0, 0); }\n',
        "bad_needed": entries,
    }
    for name, text in sources.items():
        src = out / f"{name}.cpp"
        src.write_text(text)
        cmd = ["g++", "-shared", "-fPIC", "-o", str(out / f"{name}.so"), str(src)]
        if name == "bad_needed":
            stub = out / "libshimkit_gone.so"
            subprocess.run(
                ["g++", "-shared", "-fPIC", "-o", str(stub), "-x", "c++", "/dev/null"], check=True
            )
            cmd += ["-Wl,--no-as-needed", f"-L{out}", "-lshimkit_gone"]
        subprocess.run(cmd, check=True, capture_output=True)
    (out / "libshimkit_gone.so").unlink()  # NEEDED by bad_needed.so, now missing
    return out
