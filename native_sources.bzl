"""The one description of shimkit's native build: sources, headers and flags per library.

Every build of the C/C++ code reads this file, so they cannot drift apart:
- Bazel: shims/, shims/cuda/, runtime/ and runtime/cuda/ BUILD files load it
  (`package_paths` turns the paths into labels of the calling package);
- CMake (the wheel, `cmake --install`, and the in-checkout development build of
  `shimkit.runtime.build`): through cmake/native_sources.cmake, generated from
  this file by `tools/native_sources.py` (a test checks it is current);
- tools/gpu/build_cuda_libs.py (the GPU machine has no Bazel): through
  tools/native_sources.py.
tests/test_native_sources.py checks that the three agree.

Paths are relative to the repository root. Include paths are relative to the
root too (`#include "shims/aoti_shim_abi.h"`). The shim prefix is not here:
every build adds its define from the prefix file (shim_symbol_prefix.bzl).
"""

# Compiler flags of every C++ library (Bazel adds its compilation mode's
# optimisation; CMake and the GPU builder add OPTIMIZE_COPTS).
CXX_COPTS = [
    "-std=c++17",
    "-fvisibility=hidden",
]

# Optimisation of the builds without a compilation mode of their own.
OPTIMIZE_COPTS = ["-O2"]

# Warnings of the builds that show them (CMake, the GPU builder).
WARNING_COPTS = [
    "-Wall",
    "-Wextra",
]

# Link flags of every shared library and program (AOTI-era glibc refuses
# executable stacks).
SHARED_LINKOPTS = ["-Wl,-z,noexecstack"]

# The generated rename header (`shimkit header`): exported by every shim library
# (and shipped with the CMake package), which compile with the prefix define.
RENAME_HEADER = "shims/aoti_shim_rename.h"

# The shim core (slim tensor, creation, views, copies) and the CPU ops: compiled
# unchanged into every shim library, CPU and CUDA; each device adds its own files.
SHIM_CORE_SOURCES = [
    "shims/conv_onednn.cpp",
    "shims/matmul_onednn.cpp",
    "shims/onednn_api.cpp",
    "shims/shim_attention.cpp",
    "shims/shim_cdist.cpp",
    "shims/shim_check.cpp",
    "shims/shim_conv.cpp",
    "shims/shim_core.cpp",
    "shims/shim_embedding.cpp",
    "shims/shim_grid_sample.cpp",
    "shims/shim_histogram.cpp",
    "shims/shim_index.cpp",
    "shims/shim_ops_cpu.cpp",
    "shims/shim_pool.cpp",
    "shims/shim_random.cpp",
    "shims/shim_rnn.cpp",
    "shims/shim_scan.cpp",
    "shims/shim_search.cpp",
    "shims/shim_select.cpp",
    "shims/shim_sort.cpp",
    "shims/slim_tensor.cpp",
    "shims/softmax_rows.cpp",
]

SHIM_CORE_HEADERS = [
    "shims/attention_geometry.h",
    "shims/conv_geometry.h",
    "shims/conv_onednn.h",
    "shims/conv_transpose_geometry.h",
    "shims/embedding_bag_geometry.h",
    "shims/float_compute.h",
    "shims/matmul_onednn.h",
    "shims/onednn_api.h",
    "shims/scalar_types.h",
    "shims/shim_internal.h",
    "shims/softmax_rows.h",
    "shims/strided_loop.h",
]

# The libraries. `exported_headers` are the public API, `headers` private;
# `version_script` (with @PREFIX@ for the shim prefix) limits the exports.
NATIVE_LIBRARIES = {
    # The slim CPU shims: what every CPU runtime loads RTLD_GLOBAL before a blob
    # (libshimkit_shims.so).
    "slim_shims": {
        "srcs": SHIM_CORE_SOURCES + ["shims/cpu/no_accelerator.cpp"],
        "headers": SHIM_CORE_HEADERS,
        "exported_headers": [
            "shims/aoti_shim_abi.h",
            "shims/slim_tensor.h",
        ],
        # OpenBLAS for GEMMs; libdl to open oneDNN (libdnnl-dev's libdnnl.so.2) at
        # run time (shims/onednn_api.h says why). SLEEF for the blobs, not the
        # shims: the vectorized kernels Inductor generates call ATen's SLEEF
        # functions (Sleef_expf16_u10, ...), which libtorch provides to torch's
        # runner; a NEEDED entry of the shims puts libsleef in the global scope
        # a blob binds in (docs/aot.md), so it must stay although the shims call
        # none of it.
        "linkopts": [
            "-lopenblas",
            "-ldl",
            "-Wl,--push-state,--no-as-needed",
            "-lsleef",
            "-Wl,--pop-state",
        ],
    },
    # The blob loader (libshimkit_runtime.so): calls the shims through the shim
    # library (a NEEDED entry, never linked in statically).
    "runtime": {
        "srcs": [
            "runtime/blob_loader.cpp",
            "runtime/elf_imports.cpp",
            "runtime/runtime.cpp",
            "runtime/temp_blob_file.cpp",
        ],
        "headers": [
            "runtime/blob_loader.h",
            "runtime/elf_imports.h",
            "runtime/shim_families.h",
            "runtime/temp_blob_file.h",
        ],
        "exported_headers": ["runtime/shimkit_runtime.h"],
        "linkopts": ["-ldl"],
    },
    # The smallest process that runs a blob (shimkit-run-blob).
    "run_blob": {
        "srcs": ["runtime/shimkit_run_blob.cpp"],
        "headers": [],
        "exported_headers": [],
        "linkopts": [],
    },
    # The slim CUDA shims (libshimkit_cuda_shims.so): the shim core plus the CUDA
    # device hooks, tensors and ops; CUDA itself is dlopen'd, so the host
    # toolchain builds it.
    "cuda_shims": {
        "srcs": SHIM_CORE_SOURCES + [
            "shims/cuda/cublaslt_api.cpp",
            "shims/cuda/cuda_api.cpp",
            "shims/cuda/cuda_context.cpp",
            "shims/cuda/cuda_graph.cpp",
            "shims/cuda/cuda_hooks.cpp",
            "shims/cuda/cudnn_api.cpp",
            "shims/cuda/cudnn_conv.cpp",
            "shims/cuda/gemm.cpp",
            "shims/cuda/host_fallback.cpp",
            "shims/cuda/math_mode.cpp",
            "shims/cuda/shim_cuda_device.cpp",
            "shims/cuda/shim_host_ops_cuda.cpp",
            "shims/cuda/shim_ops_cuda.cpp",
        ],
        "headers": SHIM_CORE_HEADERS + [
            "shims/cuda/autotune.h",
            "shims/cuda/cublaslt_api.h",
            "shims/cuda/cuda_api.h",
            "shims/cuda/cuda_context.h",
            "shims/cuda/cudnn_api.h",
            "shims/cuda/cudnn_conv.h",
            "shims/cuda/gemm.h",
            "shims/cuda/host_fallback.h",
            "shims/cuda/math_mode.h",
        ],
        "exported_headers": [
            "shims/aoti_shim_abi.h",
            "shims/cuda/aoti_shim_cuda_abi.h",
            "shims/slim_tensor.h",
        ],
        "version_script": "{ global: @PREFIX@aoti_*; @PREFIX@torch_*; shimkit_*; local: *; };",
        "linkopts": [
            "-ldl",
            "-lopenblas",
        ],
    },
    # The CUDA blob runner (libshimkit_cuda_runtime.so) over the CUDA shims.
    "cuda_runtime": {
        "srcs": [
            "runtime/blob_loader.cpp",
            "runtime/cuda/cuda_runner.cpp",
            "runtime/cuda/dlpack_export.cpp",
            "runtime/elf_imports.cpp",
            "runtime/temp_blob_file.cpp",
        ],
        "headers": [
            "runtime/blob_loader.h",
            "runtime/cuda/dlpack.h",
            "runtime/elf_imports.h",
            "runtime/shim_families.h",
            "runtime/temp_blob_file.h",
            "shims/aoti_shim_abi.h",
            "shims/cuda/aoti_shim_cuda_abi.h",
        ],
        "exported_headers": [
            "runtime/cuda/shimkit_cuda_runtime.h",
            "runtime/shimkit_runtime.h",
        ],
        "linkopts": ["-ldl"],
    },
}

# CPython extension modules (C) built with the `shimkit` package, by CMake: at
# wheel-build time, and for an editable install. `package`: the package the module
# is imported from (`shimkit.elf._symnames`); None: loaded by path from the native
# runtime's folder (shimkit/_native/python/ in a wheel, the runtime build in a
# checkout). `numpy`: needs numpy's C headers. Hidden visibility but for PyInit_*.
PYTHON_EXTENSIONS = {
    # Model's hot call (shimkit.runtime.fastcall).
    "_shimkit_fastcall": {
        "srcs": ["runtime/python/shimkit_fastcall.c"],
        "headers": ["runtime/shimkit_runtime.h"],
        "copts": ["-O2"],
        "numpy": True,
        "package": None,
    },
    # The ELF reader's optional compiled part (shimkit.elf.symtab; docs/development.md).
    "_symnames": {
        "srcs": ["lint/shimkit/elf/_symnames.c"],
        "headers": [],
        "copts": ["-O2"],
        "numpy": False,
        "package": "shimkit.elf",
    },
}

def package_paths(paths):
    """Repository-relative `paths` as labels for the calling BUILD file.

    Args:
      paths: file paths relative to the repository root.

    Returns:
      A path relative to the calling package for a file under its folder (a
      subfolder without a BUILD file, such as shims/cpu/, belongs to it),
      `//dir:name` for any other file.
    """
    package = native.package_name()
    labels = []
    for path in paths:
        directory, _, name = path.rpartition("/")
        if package and path.startswith(package + "/"):
            labels.append(path[len(package) + 1:])
        else:
            labels.append("//%s:%s" % (directory, name))
    return labels
