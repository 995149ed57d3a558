"""Find (or build) the slim shim and runtime libraries, CPU and CUDA, and the fast-call extension.

Lookup order (`find_libraries`):
1. `$SHIMKIT_LIB_DIR`: a directory holding `libshimkit_shims.so` and
   `libshimkit_runtime.so` (Bazel's `bazel-bin/runtime`, or a runtime built for
   another prefix with the CMake package), or, for CUDA, `libshimkit_cuda_shims.so`
   and `libshimkit_cuda_runtime.so`.
2. The libraries shipped in the package (a wheel: `shimkit/_native/lib`, see
   `shimkit.native`), built at wheel-build time for shimkit's default prefix.
3. In a checkout (an editable install, development): a CMake build of
   CMakeLists.txt, the same build description the wheel is made from, for the
   configuration's prefix, into `build/native/<variant>-<prefix>/`, redone only when a
   source, the description or the prefix file changes.

Variants: "release" and "asan" (-fsanitize=address,undefined; a checkout only).
The slim CUDA shims build in a checkout too (`build_cuda_shims`, with the GPU builder).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from shimkit import native
from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically

LIB_DIR_ENV = "SHIMKIT_LIB_DIR"
SHIMS_LIB = native.SHIMS_LIB
RUNTIME_LIB = native.RUNTIME_LIB
RUN_BLOB = native.RUN_BLOB
FASTCALL_MODULE = "_shimkit_fastcall"
VARIANTS = ("release", "asan")

# What a change of must rebuild (relative to the checkout): the sources the build
# description names live under these folders; the description and the prefix file too.
_BUILD_INPUTS = ("shims", "runtime", "cmake")
_BUILD_FILES = ("CMakeLists.txt", "native_sources.bzl")
_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".inc", ".cmake", ".in")


@dataclass(frozen=True)
class RuntimeLibs:
    """Paths of the two libraries a process needs to run prefixed blobs."""

    shims: Path
    runtime: Path


def _checkout_or_error(what: str) -> Path:
    root = native.checkout()
    if root is None:
        raise ShimkitError(
            f"this shimkit installation has no {what} (the wheel ships them under "
            f"{native.NATIVE_DIR}): reinstall shimkit's wheel, or set ${LIB_DIR_ENV} to a "
            "directory with libshimkit_shims.so and libshimkit_runtime.so"
        )
    return root


def _fingerprint(root: Path, salt: str, extra_files: list[Path]) -> str:
    """A build's cache key: `salt` (what else selects the build), the native sources and
    build description of the checkout, and `extra_files` (the prefix file, a builder)."""
    digest = hashlib.sha256(salt.encode())
    paths = [*extra_files, *(root / name for name in _BUILD_FILES)]
    for folder in _BUILD_INPUTS:
        paths += [p for p in (root / folder).rglob("*") if p.suffix in _SOURCE_SUFFIXES]
    for path in sorted(p for p in paths if p.is_file()):
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).splitlines()
        errors = [ln.strip() for ln in lines if "error" in ln.lower()] or lines[-1:] or ["?"]
        raise ShimkitError(f"{what} failed: {errors[0]}")


def build(
    variant: str = "release", out_dir: Path | None = None, config: ShimConfig | None = None
) -> RuntimeLibs:
    """Build shims, runtime, run-blob program (and, for release, the extensions) from this
    checkout with CMake for `config`'s prefix (default: `load_config()`), unless an
    up-to-date build exists."""
    if variant not in VARIANTS:
        raise ShimkitError(f"unknown runtime build variant {variant!r} (use {VARIANTS})")
    root = _checkout_or_error("runtime libraries")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise ShimkitError(f"cmake not found: install it (apt install cmake) or set ${LIB_DIR_ENV}")
    config = config or load_config()
    out = out_dir or root / "build" / "native" / f"{variant}-{config.prefix}"
    out.mkdir(parents=True, exist_ok=True)
    libs = RuntimeLibs(out / "lib" / SHIMS_LIB, out / "lib" / RUNTIME_LIB)
    key = _fingerprint(root, f"{variant}|{sys.executable}|{config.source}", [config.source])
    stamp = out / "stamp"
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == key and libs.runtime.exists():
            return libs
        configure = [cmake, "-S", str(root), "-B", str(out)]
        if not (out / "CMakeCache.txt").is_file() and shutil.which("ninja"):
            configure += ["-G", "Ninja"]  # a first configure; the cache remembers it
        configure += [
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DSHIMKIT_PREFIX_FILE={config.source}",
            f"-DSHIMKIT_SANITIZE={'ON' if variant == 'asan' else 'OFF'}",
            f"-DSHIMKIT_PYTHON_EXTENSIONS={'ON' if variant == 'release' else 'OFF'}",
        ]
        _run(configure, f"{root / 'CMakeLists.txt'}: cmake configure")
        jobs = str(os.cpu_count() or 2)
        _run([cmake, "--build", str(out), "-j", jobs], f"{root / 'CMakeLists.txt'}: cmake build")
        write_atomically(stamp, key)
    return libs


def build_run_blob(libs: RuntimeLibs) -> Path:
    """The `shimkit-run-blob` program that goes with `libs` (shipped or built beside them)."""
    shipped = native.shipped_program(RUN_BLOB)
    if shipped is not None and libs.runtime.parent == native.shipped_lib_dir():
        return shipped
    program = libs.runtime.parent.parent / "bin" / RUN_BLOB
    if not program.is_file():
        raise ShimkitError(f"{program}: not built (build the runtime with shimkit.runtime.build)")
    return program


CUDA_SHIMS_LIB = "libshimkit_cuda_shims.so"
CUDA_RUNTIME_LIB = "libshimkit_cuda_runtime.so"


def build_cuda(out_dir: Path | None = None) -> RuntimeLibs:
    """The slim CUDA shim and runtime libraries, built without a GPU (they open the CUDA
    libraries at run time) by tools/gpu/build_cuda_libs.py into build/cuda/<key>/, redone
    only when a source, the builder or the checkout's prefix file change. (They serve the
    checkout's prefix, rules/shim_symbol_prefix.bzl, as that builder reads it.)"""
    import importlib.util

    root = _checkout_or_error("slim CUDA libraries (they build in a checkout)")
    cuda_builder = root / "tools" / "gpu" / "build_cuda_libs.py"
    if shutil.which("g++") is None:
        raise ShimkitError(f"g++ not found: install it or set ${LIB_DIR_ENV}")
    spec = importlib.util.spec_from_file_location("build_cuda_libs", cuda_builder)
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    prefix_file = root / "rules" / "shim_symbol_prefix.bzl"
    key = _fingerprint(root, "cuda", [cuda_builder, prefix_file])
    out = out_dir or root / "build" / "cuda" / key
    libs = RuntimeLibs(out / CUDA_SHIMS_LIB, out / CUDA_RUNTIME_LIB)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (libs.shims.is_file() and libs.runtime.is_file()):
            try:
                builder.build(out)
            except builder.BuildError as exc:
                first = (str(exc).strip().splitlines() or ["?"])[-1]
                raise ShimkitError(
                    f"{cuda_builder}: the CUDA libraries do not build: {first}"
                ) from None
    return libs


def _from_lib_dir(shims: str, runtime: str) -> RuntimeLibs | None:
    """The libraries in $SHIMKIT_LIB_DIR, if it is set. The shim library may sit
    elsewhere (Bazel's _solib_*): the runtime finds it through its NEEDED entry and
    reports the real path once loaded, so only the runtime must be there."""
    env = os.environ.get(LIB_DIR_ENV)
    if not env:
        return None
    libs = RuntimeLibs(Path(env) / shims, Path(env) / runtime)
    if not libs.runtime.is_file():
        raise ShimkitError(f"{libs.runtime}: not found (${LIB_DIR_ENV}={env})")
    return libs


def find_libraries(variant: str = "release", config: ShimConfig | None = None) -> RuntimeLibs:
    """The libraries to load: $SHIMKIT_LIB_DIR, else shipped (they serve shimkit's default
    prefix), else a checkout build for `config`'s prefix."""
    from_env = _from_lib_dir(SHIMS_LIB, RUNTIME_LIB)
    if from_env is not None:
        return from_env
    lib_dir = native.shipped_lib_dir()
    if lib_dir is not None and variant == "release":
        return RuntimeLibs(lib_dir / SHIMS_LIB, lib_dir / RUNTIME_LIB)
    if lib_dir is not None and native.checkout() is None:
        raise ShimkitError(
            f"the {variant!r} runtime variant is built only in a shimkit checkout "
            "(the wheel ships 'release')"
        )
    return build(variant, config=config)


def find_cuda_libraries() -> RuntimeLibs:
    """The CUDA libraries to load: from $SHIMKIT_LIB_DIR, else a (cached) checkout build."""
    return _from_lib_dir(CUDA_SHIMS_LIB, CUDA_RUNTIME_LIB) or build_cuda()


def build_fastcall() -> Path:
    """The CPython extension behind Model's fast call: shipped, else built in the checkout
    (with the release runtime; it calls the runtime through a function pointer, so one
    build serves every runtime variant and $SHIMKIT_LIB_DIR)."""
    shipped = native.shipped_extension(FASTCALL_MODULE)
    if shipped is not None:
        return shipped
    _checkout_or_error("fast-call extension")
    libs = build("release", config=load_config(native.default_prefix_file()))
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = libs.runtime.parent.parent / "python" / f"{FASTCALL_MODULE}{suffix}"
    if not path.is_file():
        raise ShimkitError(f"{path}: the fast-call extension was not built")
    return path
