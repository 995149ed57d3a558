"""Compiling for CUDA: a prefixed, libtorch-free CUDA blob with its kernels inside.

`shimkit.aot.compile` produces prefixed blobs for whatever device the example
inputs live on; a CUDA blob also needs its kernels inside the .so
(`aot_inductor.embed_kernel_binary`, set by `shimkit.aot.compile` for device
"cuda"), because a slim runtime passes no cubin directory when it creates the
model container, and its attention in math form (`shimkit.aot.attention`),
because the slim CUDA shims have no fused attention fallback. `compile_cuda` does
both and checks the blob against the slim CUDA shims (`--target slim-cuda`) before it
writes the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shimkit.aot.compile import CompileResult, compile_model
from shimkit.aot.torchenv import require_torch
from shimkit.config import ShimConfig
from shimkit.errors import ShimkitError


def require_cuda_torch(torch: Any) -> None:
    """One-line ShimkitError unless this torch can compile for CUDA (a CUDA build, a GPU)."""
    if getattr(torch.version, "cuda", None) is None:
        raise ShimkitError(
            f"--device cuda: torch {torch.__version__} is a CPU-only build; compiling for CUDA "
            "needs a CUDA build of torch and a GPU (compile there, run the .pt2 anywhere)"
        )
    if not torch.cuda.is_available():
        raise ShimkitError(
            f"--device cuda: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no "
            "usable GPU; compiling for CUDA needs one"
        )


def compile_cuda(
    model: Any,
    example_inputs: tuple[Any, ...],
    output: str | Path,
    config: ShimConfig | None = None,
    force: bool = False,
    decompose_attention: bool = True,
    target: str | None = "slim-cuda",
    show_progress: bool = True,
) -> CompileResult:
    """Export `model` on CUDA example inputs and compile it into a prefixed .pt2 for
    `target` (a ShimkitError names what keeps the blob from loading there). With
    `decompose_attention` (default) attention is compiled in its math form; for the slim
    target, GRU and LSTM cells are too (their fused CUDA kernels have no C shim)."""
    require_cuda_torch(require_torch())
    return compile_model(
        model,
        example_inputs,
        output,
        config=config,
        force=force,
        show_progress=show_progress,
        target=target,
        device="cuda",
        decompose_attention=decompose_attention,
        decompose_rnn_cells=target != "libtorch",
    )
