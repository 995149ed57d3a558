"""Import torch for the AOT helpers, or say clearly which version is needed and how to get it."""

from __future__ import annotations

import re
from types import ModuleType

from shimkit.errors import ShimkitError

# aoti_compile_and_package / aoti_load_package (the .pt2 flow) arrived in torch 2.6.
MIN_TORCH = (2, 6)
INSTALL = "pip install 'torch>=2.6' --index-url https://download.pytorch.org/whl/cpu"


def parse_version(text: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise ShimkitError(f"torch: cannot parse its version {text!r}")
    return int(match.group(1)), int(match.group(2))


def check_version(version: str) -> None:
    """Raise a clear error if `version` is older than MIN_TORCH."""
    if parse_version(version) < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise ShimkitError(
            f"torch {version} is too old: shimkit compile needs torch >= {need} "
            f"(aoti_compile_and_package); upgrade with: {INSTALL}"
        )


def require_torch() -> ModuleType:
    """Import torch (and its Inductor) or raise a one-line ShimkitError."""
    try:
        import torch
        import torch._inductor
        import torch.export
    except ImportError as exc:
        raise ShimkitError(f"torch is not importable ({exc}); install it with: {INSTALL}") from None
    check_version(str(torch.__version__))
    return torch


def has_native_prefix_option(torch: ModuleType) -> bool:
    """True when Inductor can rename shim imports itself (aot_inductor.shim_symbol_prefix)."""
    return hasattr(torch._inductor.config.aot_inductor, "shim_symbol_prefix")


def torch_has_c_shim(op_name: str) -> bool:
    """Whether the installed torch's Inductor calls `op_name` (e.g.
    "aten.grid_sampler_3d.default") through a C shim; if not, its blob would need libtorch's
    proxy executor."""
    from torchgen.aoti.fallback_ops import inductor_fallback_ops

    return op_name in inductor_fallback_ops
