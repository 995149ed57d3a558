"""Find (or build) the slim shim and runtime shared libraries.

Lookup order:
1. `$SHIMKIT_LIB_DIR`: a directory holding `libshimkit_shims.so` and
   `libshimkit_runtime.so` (e.g. Bazel's `bazel-bin/runtime`, or an install).
2. A build from this checkout's `shims/` and `runtime/` sources with `g++`
   into `build/runtime/<variant>/`, redone only when a source or flag changes.

Variants: "release" (-O2) and "asan" (-fsanitize=address,undefined). The
prefix define comes from the shim config, never from a literal.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from shimkit.config import load_config
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically

LIB_DIR_ENV = "SHIMKIT_LIB_DIR"
SHIMS_LIB = "libshimkit_shims.so"
RUNTIME_LIB = "libshimkit_runtime.so"
REPO_ROOT = Path(__file__).resolve().parents[3]
VARIANTS = ("release", "asan")

_COMMON = ["-std=c++17", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"]
_VARIANT_FLAGS = {
    "release": ["-O2"],
    "asan": ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined"],
}
_LINK_COMMON = ["-shared", "-Wl,-z,noexecstack", "-Wl,-z,defs"]
# The runtime library's sources (runtime/ also holds programs, tests and the
# backend registry, which hosts build with their own mode).
RUNTIME_SOURCES = ("elf_imports.cpp", "runtime.cpp", "temp_blob_file.cpp")
RUN_BLOB = "shimkit-run-blob"
# What the shim library links: OpenBLAS (GEMMs) and libdl (it opens oneDNN,
# libdnnl-dev's libdnnl.so.2, at run time: shims/onednn_api.h says why).
# shims/BUILD.bazel lists the same.
SHIM_LINK_LIBS = ["-lopenblas", "-ldl"]


@dataclass(frozen=True)
class RuntimeLibs:
    """Paths of the two libraries a process needs to run prefixed blobs."""

    shims: Path
    runtime: Path


def _sources() -> tuple[list[Path], list[Path], list[Path]]:
    shims = sorted((REPO_ROOT / "shims").glob("*.cpp"))
    runtime = [REPO_ROOT / "runtime" / name for name in RUNTIME_SOURCES]
    runtime = [p for p in runtime if p.is_file()]
    headers = sorted((REPO_ROOT / "shims").glob("*.h")) + sorted(
        (REPO_ROOT / "runtime").glob("*.h")
    )
    return shims, runtime, headers


def _compile(source: Path, obj: Path, flags: list[str]) -> None:
    cmd = ["g++", *flags, "-I", str(REPO_ROOT), "-c", str(source), "-o", str(obj)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise ShimkitError(f"{source}: does not compile: {first}")


def _link(objs: list[Path], out: Path, flags: list[str], extra: list[str]) -> None:
    cmd = ["g++", *flags, *_LINK_COMMON, "-o", str(out), *map(str, objs), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise ShimkitError(f"{out}: link failed: {first}")


def build(variant: str = "release", out_dir: Path | None = None) -> RuntimeLibs:
    """Compile shims and runtime for `variant` unless an up-to-date build exists."""
    if variant not in VARIANTS:
        raise ShimkitError(f"unknown runtime build variant {variant!r} (use {VARIANTS})")
    shims, runtime, headers = _sources()
    if not shims or not runtime:
        raise ShimkitError(
            f"{REPO_ROOT}: no shims/ or runtime/ sources here; set ${LIB_DIR_ENV} to a "
            "directory with the built libraries"
        )
    if shutil.which("g++") is None:
        raise ShimkitError(f"g++ not found: install it or set ${LIB_DIR_ENV}")
    config = load_config()
    flags = [*_COMMON, *_VARIANT_FLAGS[variant], *config.flags]
    digest = hashlib.sha256(" ".join(flags).encode())
    for path in [*shims, *runtime, *headers]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:16]
    out = out_dir or REPO_ROOT / "build" / "runtime" / variant
    out.mkdir(parents=True, exist_ok=True)
    libs = RuntimeLibs(out / SHIMS_LIB, out / RUNTIME_LIB)
    stamp = out / "stamp"
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == key and libs.shims.exists():
            return libs
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            work = Path(tmp)
            jobs = [(s, work / f"{s.parent.name}_{s.stem}.o") for s in [*shims, *runtime]]
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
                list(pool.map(lambda job: _compile(job[0], job[1], flags), jobs))
            objs = dict(jobs)
            shim_out, runtime_out = work / SHIMS_LIB, work / RUNTIME_LIB
            _link([objs[s] for s in shims], shim_out, flags, SHIM_LINK_LIBS)
            _link(
                [objs[s] for s in runtime],
                runtime_out,
                flags,
                [f"-L{work}", "-lshimkit_shims", "-Wl,-rpath,$ORIGIN", "-ldl"],
            )
            os.replace(shim_out, libs.shims)
            os.replace(runtime_out, libs.runtime)
        write_atomically(stamp, key)
    return libs


def build_run_blob(libs: RuntimeLibs) -> Path:
    """The `shimkit-run-blob` program (runtime/shimkit_run_blob.cpp) next to `libs`."""
    out = libs.runtime.parent / RUN_BLOB
    source = REPO_ROOT / "runtime" / "shimkit_run_blob.cpp"
    if out.exists() and out.stat().st_mtime >= max(
        source.stat().st_mtime, libs.runtime.stat().st_mtime
    ):
        return out
    cmd = [
        "g++",
        "-std=c++17",
        "-O2",
        "-I",
        str(REPO_ROOT),
        str(source),
        "-o",
        str(out),
        f"-L{libs.runtime.parent}",
        "-lshimkit_runtime",
        f"-Wl,-rpath,{libs.runtime.parent}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise ShimkitError(f"{source}: does not build: {first}")
    return out


def find_libraries(variant: str = "release") -> RuntimeLibs:
    """The libraries to load: from $SHIMKIT_LIB_DIR, else a (cached) local build."""
    env = os.environ.get(LIB_DIR_ENV)
    if env:
        # The shim library may sit elsewhere (Bazel's _solib_*); the runtime
        # finds it through its NEEDED entry and reports the real path once loaded.
        libs = RuntimeLibs(Path(env) / SHIMS_LIB, Path(env) / RUNTIME_LIB)
        if not libs.runtime.is_file():
            raise ShimkitError(f"{libs.runtime}: not found (${LIB_DIR_ENV}={env})")
        return libs
    return build(variant)


FASTCALL_SOURCE = REPO_ROOT / "runtime" / "python" / "shimkit_fastcall.c"
FASTCALL_MODULE = "_shimkit_fastcall"


def build_fastcall(out_dir: Path | None = None) -> Path:
    """Compile the CPython extension behind Model's fast call (cached).

    It calls the runtime through a function pointer, so one build serves every
    runtime variant and $SHIMKIT_LIB_DIR; the cache key covers the source, the
    runtime header, the interpreter's ABI and numpy's version.
    """
    import sysconfig

    import numpy

    if not FASTCALL_SOURCE.is_file():
        raise ShimkitError(f"{FASTCALL_SOURCE}: extension source not found")
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise ShimkitError("gcc not found")
    py_include = sysconfig.get_paths()["include"]
    if not (Path(py_include) / "Python.h").is_file():
        raise ShimkitError(f"{py_include}: Python.h not found (install the Python headers)")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    flags = ["-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra"]
    flags += ["-Wl,-z,noexecstack", "-I", py_include, "-I", numpy.get_include()]
    flags += ["-I", str(REPO_ROOT)]
    digest = hashlib.sha256(" ".join([compiler, suffix, numpy.__version__, *flags]).encode())
    for path in (FASTCALL_SOURCE, REPO_ROOT / "runtime" / "shimkit_runtime.h"):
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:16]
    out = (out_dir or REPO_ROOT / "build" / "runtime" / "fastcall") / key
    target = out / f"{FASTCALL_MODULE}{suffix}"
    if target.is_file():
        return target
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        tmp = out / f".{FASTCALL_MODULE}.{os.getpid()}.so"
        cmd = [compiler, *flags, str(FASTCALL_SOURCE), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            first = (proc.stderr.strip().splitlines() or ["?"])[0]
            raise ShimkitError(f"{FASTCALL_SOURCE}: does not compile: {first}")
        os.replace(tmp, target)
    return target
