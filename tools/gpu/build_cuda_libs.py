"""Build the slim CUDA shim library and the CUDA runner without Bazel.

The GPU machine has a compiler but no Bazel, and a library built here may not
run there, so both sides build from the same sources with this script (CI
builds them with Bazel too: //shims/cuda, //runtime/cuda). Sources and flags
come from native_sources.bzl (the one description Bazel and CMake read too,
through tools/native_sources.py), the prefix from rules/shim_symbol_prefix.bzl
through shimkit.config unless --unprefixed (the lint negative control); both
need starlark-pyo3.

    python3 tools/gpu/build_cuda_libs.py OUT_DIR [--unprefixed] [--cxx g++]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from native_sources import load as load_native_build  # noqa: E402

NATIVE = load_native_build()
CUDA_SHIMS = NATIVE.libraries["cuda_shims"]
CUDA_RUNTIME = NATIVE.libraries["cuda_runtime"]
SHIM_SOURCES: list[str] = list(CUDA_SHIMS["srcs"])
RUNNER_SOURCES: list[str] = list(CUDA_RUNTIME["srcs"])
SHIMS_LIB = "libshimkit_cuda_shims.so"
RUNNER_LIB = "libshimkit_cuda_runtime.so"
CBLAS_FALLBACK = ROOT / "tools" / "gpu" / "cblas_fallback"
# oneDNN's headers (libdnnl-dev's /usr/include/oneapi), copied here for a machine without
# them (the GPU image): the shims need only its types, and open the library at run time
# (shims/onednn_api.h), so no oneDNN library is needed to build or to load them.
ONEDNN_HEADERS = ROOT / "tools" / "gpu" / "include"


class BuildError(Exception):
    pass


def prefix_flags(unprefixed: bool) -> tuple[list[str], str]:
    """(-D flags, prefix) from the single source of truth."""
    if unprefixed:
        return [], ""
    sys.path.insert(0, str(ROOT / "lint"))
    from shimkit.config import load_config

    config = load_config(ROOT / "rules" / "shim_symbol_prefix.bzl")
    return list(config.flags), config.prefix


def has_header(cxx: str, header: str) -> bool:
    probe = subprocess.run(
        [cxx, "-x", "c++", "-", "-fsyntax-only"],
        input=f"#include <{header}>\n",
        text=True,
        capture_output=True,
    )
    return probe.returncode == 0


def onednn_include(cxx: str) -> list[str]:
    """The include flags for oneDNN's headers: none where the compiler has them, else the
    copy in tools/gpu/include."""
    if has_header(cxx, "oneapi/dnnl/dnnl.h"):
        return []
    if (ONEDNN_HEADERS / "oneapi" / "dnnl" / "dnnl.h").is_file():
        return ["-I", str(ONEDNN_HEADERS)]
    raise BuildError(
        "oneDNN's headers are missing: install libdnnl-dev, or copy its /usr/include/oneapi "
        f"to {ONEDNN_HEADERS}/ (docs/cuda.md)"
    )


def have_openblas(cxx: str) -> bool:
    return has_header(cxx, "cblas.h") and bool(
        subprocess.run(["sh", "-c", "ldconfig -p | grep -q libopenblas"]).returncode == 0
    )


def run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(cmd)}\n{done.stdout}{done.stderr}")


def build(
    out: Path,
    unprefixed: bool = False,
    cxx: str = "g++",
    jobs: int = os.cpu_count() or 4,
    cblas_fallback: bool = False,
    sanitize: bool = False,
) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    flags, prefix = prefix_flags(unprefixed)
    blas_include: list[str] = []
    shim_linkopts = list(CUDA_SHIMS["linkopts"])
    extra_objects: list[str] = []
    if cblas_fallback or not have_openblas(cxx):
        # The GPU image has no OpenBLAS: the CPU fallbacks get a plain sgemm.
        blas_include = ["-I", str(CBLAS_FALLBACK)]
        shim_linkopts.remove("-lopenblas")
        extra_objects = [str(CBLAS_FALLBACK / "cblas_fallback.cpp")]
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"] if sanitize else []
    optimize = ["-O1"] if sanitize else NATIVE.optimize_copts
    common = [cxx, *NATIVE.cxx_copts, *optimize, "-fPIC", *NATIVE.warning_copts, *san]
    common += ["-I", str(ROOT), *blas_include, *onednn_include(cxx), *flags]

    def compile_one(src: str) -> str:
        obj = out / "obj" / (src.replace("/", "_") + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        path = src if src.startswith("/") else str(ROOT / src)
        run([*common, "-c", path, "-o", str(obj)])
        return str(obj)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        shim_objs = list(pool.map(compile_one, SHIM_SOURCES + extra_objects))
        runner_objs = list(pool.map(compile_one, RUNNER_SOURCES))
    lds = out / "cuda_shims.lds"
    lds.write_text(CUDA_SHIMS["version_script"].replace("@PREFIX@", prefix) + "\n")
    shims = out / SHIMS_LIB
    run(
        [
            cxx,
            "-shared",
            "-o",
            str(shims),
            *san,
            *shim_objs,
            f"-Wl,--version-script={lds}",
            *NATIVE.shared_linkopts,
            *shim_linkopts,
        ]
    )
    runner = out / RUNNER_LIB
    run(
        [
            cxx,
            "-shared",
            "-o",
            str(runner),
            *san,
            *runner_objs,
            f"-L{out}",
            "-lshimkit_cuda_shims",
            "-Wl,-rpath,$ORIGIN",
            *NATIVE.shared_linkopts,
            *CUDA_RUNTIME["linkopts"],
        ]
    )
    return {"shims": shims, "runner": runner}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--unprefixed", action="store_true")
    parser.add_argument("--cxx", default="g++")
    parser.add_argument("--cblas-fallback", action="store_true", help="never use OpenBLAS")
    args = parser.parse_args(argv)
    try:
        built = build(args.out, args.unprefixed, args.cxx, cblas_fallback=args.cblas_fallback)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    for path in built.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
