"""Compile a model for CUDA into a prefixed, libtorch-free .pt2.

`shimkit.aot.compile` produces such blobs for whatever device the example
inputs live on; a CUDA blob also needs its kernels inside the .so
(`aot_inductor.embed_kernel_binary`), because a slim runtime passes no cubin
directory when it creates the model container. This module adds that
option and reports, rather than hides, what keeps a CUDA blob from being
prefixed and libtorch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shimkit.aot.compile import (
    blob_problems,
    export_program,
    inductor_configs,
    package_blobs,
    prepare_output,
    problems_line,
)
from shimkit.aot.torchenv import require_torch
from shimkit.config import ShimConfig, load_config
from shimkit.elf import ElfImage
from shimkit.errors import ShimkitError
from shimkit.fileio import staged_output
from shimkit.header import find_torch, shim_names

EMBED_OPTION = "aot_inductor.embed_kernel_binary"


@dataclass
class CudaCompileResult:
    path: Path
    blobs: dict[str, ElfImage]
    native_prefix: bool
    options: dict[str, Any]
    problems: list[str] = field(default_factory=list)


def cuda_options(
    torch: Any, config: ShimConfig, names: list[str], prefixed: bool
) -> tuple[dict[str, Any], bool]:
    """Inductor options for a CUDA blob: the prefixed set (or torch's default), kernels embedded."""
    if prefixed:
        options, native = inductor_configs(torch, config, names)
    else:
        options, native = {}, False
    try:
        torch._inductor.config.aot_inductor.embed_kernel_binary  # noqa: B018 (probe)
    except AttributeError:
        raise ShimkitError(
            f"torch {torch.__version__}: no {EMBED_OPTION} option; a slim runtime cannot "
            "find this torch's CUDA kernels"
        ) from None
    options[EMBED_OPTION] = True
    return options, native


def compile_cuda(
    model: Any,
    example_inputs: tuple[Any, ...],
    output: str | Path,
    config: ShimConfig | None = None,
    prefixed: bool = True,
    force: bool = False,
) -> CudaCompileResult:
    """Export and compile `model` (CUDA inputs) into `output`; problems are listed, not raised."""
    torch = require_torch()
    config = config or load_config()
    out = prepare_output(output, force)
    label = type(model).__name__
    exported = export_program(torch, model, tuple(example_inputs), label)
    names = shim_names(find_torch().include_dir)
    options, native = cuda_options(torch, config, names, prefixed)
    with staged_output(out) as temp:
        blobs = package_blobs(torch, exported, temp, options, label, out)
    problems: list[str] = []
    if prefixed:
        problems = [
            problems_line(image, found, None)
            for image in blobs.values()
            if (found := blob_problems(image, config))
        ]
    return CudaCompileResult(out, blobs, native, {k: str(v) for k, v in options.items()}, problems)
