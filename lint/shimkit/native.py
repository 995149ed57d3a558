"""Where shimkit's native parts are: installed with the package, or in this checkout.

A wheel carries them under `shimkit/_native/`, built by CMake at wheel-build
time from the one build description (CMakeLists.txt over native_sources.bzl):

    lib/libshimkit_shims.so, lib/libshimkit_runtime.so   the slim CPU runtime
    bin/shimkit-run-blob                                  the smallest blob runner
    python/_shimkit_fastcall*.so                          Model's fast call (loaded by path)
    include/shims/aoti_shim_rename.h, ...                 headers for shim libraries
    share/cmake/shimkit/                                  the CMake package
    share/shimkit/shim_symbol_prefix.bzl                  the prefix file they were built for

(Extension modules imported from a package, `shimkit.elf._symnames`, sit in that
package.) An editable install (development) has none of these: its checkout has
the sources, and `shimkit.runtime.build` builds them from the same CMake
description into build/native/. Under Bazel the linter runs from runfiles laid
out like the checkout (lint/shimkit next to shims/ and rules/).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
NATIVE_DIR = PACKAGE_DIR / "_native"
# lint/shimkit -> the checkout (or the Bazel runfiles tree) holding shims/ and rules/
SOURCE_ROOT = PACKAGE_DIR.parents[1]

SHIMS_LIB = "libshimkit_shims.so"
RUNTIME_LIB = "libshimkit_runtime.so"
RUN_BLOB = "shimkit-run-blob"
RENAME_HEADER = Path("shims") / "aoti_shim_rename.h"
PREFIX_FILE = "shim_symbol_prefix.bzl"


def shipped() -> bool:
    """True when this installation carries the built runtime (a wheel)."""
    return (NATIVE_DIR / "lib" / RUNTIME_LIB).is_file()


def shipped_lib_dir() -> Path | None:
    """The folder with the shipped shim and runtime libraries, or None."""
    return NATIVE_DIR / "lib" if shipped() else None


def shipped_program(name: str) -> Path | None:
    path = NATIVE_DIR / "bin" / name
    return path if path.is_file() else None


def shipped_extension(module: str) -> Path | None:
    """A shipped CPython extension module of this interpreter's ABI, or None."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = NATIVE_DIR / "python" / f"{module}{suffix}"
    return path if path.is_file() else None


def checkout() -> Path | None:
    """The source checkout this package runs from (editable install), or None."""
    if (SOURCE_ROOT / "CMakeLists.txt").is_file() and (SOURCE_ROOT / "shims").is_dir():
        return SOURCE_ROOT
    return None


def default_prefix_file() -> Path | None:
    """shimkit's default prefix file: the copy the shipped libraries were built
    for, else the checkout's (or runfiles') rules/shim_symbol_prefix.bzl."""
    for candidate in (
        NATIVE_DIR / "share" / "shimkit" / PREFIX_FILE,
        SOURCE_ROOT / "rules" / PREFIX_FILE,
    ):
        if candidate.is_file():
            return candidate
    return None


def rename_header() -> Path | None:
    """The generated rename header: shipped, or the checkout's (runfiles')."""
    for candidate in (NATIVE_DIR / "include" / RENAME_HEADER, SOURCE_ROOT / RENAME_HEADER):
        if candidate.is_file():
            return candidate
    return None


def cmake_package_dir() -> Path | None:
    """The folder holding shimkitConfig.cmake (for -Dshimkit_DIR=...), or None."""
    path = NATIVE_DIR / "share" / "cmake" / "shimkit"
    return path if (path / "shimkitConfig.cmake").is_file() else None
