"""The Inductor options of a shimkit compile: a prefixed, libtorch-free blob
(`inductor_configs`), inference options per device (weights frozen, vector
instructions), and the programs and processes those options need care with."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.torchenv import has_native_prefix_option
from shimkit.aot.wrapper import make_compiler_wrapper
from shimkit.config import ShimConfig
from shimkit.errors import ShimkitError
from shimkit.header import find_torch, render_rename_header

# CPU blobs are inference artifacts: freeze the weights so Inductor folds what
# depends only on them (batch-norm into convolution weights and biases, the
# layout changes it wants for convolution weights) into constants at compile
# time instead of recomputing them on every run. Those constants are what the
# slim convolution caches in oneDNN's layout (shims/conv_onednn.cpp). Weight
# prepacking stays off: it would emit mkldnn-specific ops and opaque tensors
# that only libtorch serves. Freezing only happens with grad mode off.
# `cpp.vec_isa_ok`: Inductor vectorizes only for an instruction set it has proved by
# building and dlopening a probe, and without libtorch that probe cannot load (ATen's
# vector code calls SLEEF, which libtorch provides): every kernel came out scalar. The
# compile machine's own instruction set is taken instead, as the probe would have found
# it with libtorch; the blobs then import SLEEF, which the slim shims bring (a NEEDED
# libsleef; native_sources.bzl) and libtorch has for torch's runner.
CPU_INFERENCE_OPTIONS: dict[str, Any] = {
    "freezing": True,
    "cpp.weight_prepack": False,
    "cpp.vec_isa_ok": True,
}


# Inductor cannot freeze a program that calls nonzero: torch 2.13 on the CPU fails with
# "materialize_symints: no producer for u0", torch 2.11 on CUDA with "Could not guard on
# data-dependent expression u0 > 1" (boolean indexing and masked_select, also sized by the
# data, are not affected). Such a program is compiled without freezing: correct, with its
# weights not folded, and the result says so.
UNFREEZABLE_OPS = ("aten.nonzero.",)


def unfreezable_calls(exported: Any) -> list[str]:
    """The calls of `exported` that keep Inductor from freezing it (UNFREEZABLE_OPS)."""
    return sorted(
        {
            str(node.target)
            for node in exported.graph.nodes
            if node.op == "call_function" and str(node.target).startswith(UNFREEZABLE_OPS)
        }
    )


# A CUDA blob carries its kernels inside the .so: a slim runtime passes no cubin
# directory when it creates the model container.
EMBED_OPTION = "aot_inductor.embed_kernel_binary"

# CUDA blobs are frozen too: batch-norm folds into the convolutions before them, and
# linears that read one input (a transformer's query, key and value) become one GEMM
# over their weights concatenated at compile time (Inductor's freezing patterns; on
# CUDA they need no option). Fewer, larger kernels per run. The few CPU kernels a CUDA
# blob may have stay scalar: the slim CUDA shims bring no SLEEF.
CUDA_INFERENCE_OPTIONS: dict[str, Any] = {"freezing": True, "cpp.vec_isa_ok": False}


def forget_vector_instructions(torch: ModuleType) -> None:
    """Make Inductor choose its CPU instruction set again, under this compile's options.

    Inductor keeps the instruction sets it found for the rest of the process: after a
    compile that allowed none (a CUDA one), a CPU compile would come out scalar, and
    after a CPU compile a CUDA blob's CPU kernels would import SLEEF.
    """
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.valid_vec_isa_list.cache_clear()


def inductor_configs(
    torch: ModuleType, config: ShimConfig, names: list[str]
) -> tuple[dict[str, Any], bool]:
    """The Inductor options for a prefixed, libtorch-free blob; and whether torch renames."""
    native = has_native_prefix_option(torch)
    if native:
        wrapper = make_compiler_wrapper(config, header_text=None)
    else:
        header = render_rename_header(names, config.define, find_torch().version)
        wrapper = make_compiler_wrapper(config, header_text=header)
    options: dict[str, Any] = {
        "cpp.cxx": str(wrapper.path),
        "aot_inductor.link_libtorch": False,
    }
    if native:
        options["aot_inductor.shim_symbol_prefix"] = config.prefix
    return options, native


def embed_kernels(torch: Any, options: dict[str, Any]) -> None:
    """Adds the Inductor option that puts a CUDA blob's kernels inside the .so."""
    try:
        torch._inductor.config.aot_inductor.embed_kernel_binary  # noqa: B018 (probe)
    except AttributeError:
        raise ShimkitError(
            f"torch {torch.__version__}: no {EMBED_OPTION} option; a slim runtime cannot "
            "find this torch's CUDA kernels"
        ) from None
    options[EMBED_OPTION] = True
