"""Build the slim CUDA shim library and the CUDA runner without Bazel.

The GPU machine has a compiler but no Bazel, and a library built here may not
run there, so both sides build from the same sources with this script (CI
builds them with Bazel too: //shims/cuda, //runtime/cuda). Standard library
only; the prefix comes from rules/shim_symbol_prefix.bzl through
shimkit.config (needs starlark-pyo3) unless --unprefixed (the lint negative
control).

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
# The CUDA library's device files and ops (shims/cuda/BUILD.bazel lists the same).
CUDA_SOURCES = [
    "shims/cuda/cublaslt_api.cpp",
    "shims/cuda/cuda_api.cpp",
    "shims/cuda/cuda_context.cpp",
    "shims/cuda/cuda_graph.cpp",
    "shims/cuda/cuda_hooks.cpp",
    "shims/cuda/cudnn_api.cpp",
    "shims/cuda/cudnn_conv.cpp",
    "shims/cuda/gemm.cpp",
    "shims/cuda/shim_cuda_device.cpp",
    "shims/cuda/shim_ops_cuda.cpp",
]


def core_shim_sources() -> list[str]:
    """The shim core and the CPU ops, compiled unchanged into every shim library: every
    shims/*.cpp (shims/BUILD.bazel's :core_sources)."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "shims").glob("*.cpp"))


SHIM_SOURCES = CUDA_SOURCES + core_shim_sources()
# The loader both runtimes share, plus the CUDA runner (runtime/cuda/BUILD.bazel).
RUNNER_SOURCES = [
    "runtime/blob_loader.cpp",
    "runtime/cuda/cuda_runner.cpp",
    "runtime/elf_imports.cpp",
    "runtime/temp_blob_file.cpp",
]
SHIMS_LIB = "libshimkit_cuda_shims.so"
RUNNER_LIB = "libshimkit_cuda_runtime.so"
CBLAS_FALLBACK = ROOT / "tools" / "gpu" / "cblas_fallback"


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


def have_openblas(cxx: str) -> bool:
    probe = subprocess.run(
        [cxx, "-x", "c++", "-", "-fsyntax-only"],
        input="#include <cblas.h>\n",
        text=True,
        capture_output=True,
    )
    return probe.returncode == 0 and bool(
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
    blas_link = ["-lopenblas"]
    extra_objects: list[str] = []
    if cblas_fallback or not have_openblas(cxx):
        # The GPU image has no OpenBLAS: the CPU fallbacks get a plain sgemm.
        blas_include = ["-I", str(CBLAS_FALLBACK)]
        blas_link = []
        extra_objects = [str(CBLAS_FALLBACK / "cblas_fallback.cpp")]
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"] if sanitize else []
    common = [cxx, "-std=c++17", "-O1" if sanitize else "-O2", "-fPIC", "-fvisibility=hidden"]
    common += ["-Wall", "-Wextra", *san]
    common += ["-I", str(ROOT), *blas_include, *flags]

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
    lds.write_text(
        f"{{ global: {prefix}aoti_*; {prefix}torch_*; shimkit_*; local: *; }};\n"
        if prefix
        else "{ global: aoti_*; torch_*; shimkit_*; local: *; };\n"
    )
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
            "-Wl,-z,noexecstack",
            "-ldl",
            *blas_link,
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
            "-Wl,-z,noexecstack",
            "-ldl",
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
