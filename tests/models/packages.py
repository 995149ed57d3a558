"""Compiled packages of the zoo models, cached on disk for tests and bench/bench_models.py.

A model is exported (seconds) and its package looked up by a digest of what the
compile depends on: the exported graph's code, every weight and constant, the input
specs and dynamic ranges, the compile options, the rename header, the prefix file and
torch's version. Only a miss runs AOTInductor (tens of seconds): prefixed with
`shimkit compile`'s API for the slim runtime and, when asked, unprefixed with torch's
own packaging for torch's runner (same ExportedProgram, same Inductor options).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "model-suite"


@dataclass(frozen=True)
class Package:
    name: str
    prefixed: Path
    unprefixed: Path | None
    inputs: tuple[Any, ...]
    more_inputs: list[tuple[Any, ...]]
    model: Any
    weight_bytes: int
    rtol: float  # the zoo's tolerance for this model's float outputs


def _digest(exported: Any, options: dict[str, Any]) -> str:
    import torch

    digest = hashlib.sha256()
    digest.update(exported.graph_module.code.encode())
    for name, tensor in sorted({**exported.state_dict, **exported.constants}.items()):
        digest.update(f"{name}{tensor.stride()}".encode())
        digest.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    for spec in exported.graph_signature.input_specs:
        digest.update(str(spec).encode())
    for node in exported.graph.find_nodes(op="placeholder"):
        digest.update(str(node.meta.get("val")).encode())
    digest.update(str(exported.range_constraints).encode())
    digest.update(repr(sorted(options.items())).encode())
    for path in (ROOT / "shims" / "aoti_shim_rename.h", ROOT / "rules" / "shim_symbol_prefix.bzl"):
        digest.update(path.read_bytes())
    digest.update(torch.__version__.encode())
    return digest.hexdigest()[:16]


def compiled_pair(
    name: str, cache: Path = CACHE, unprefixed: bool = True, twin_as_exported: bool = False
) -> Package:
    """Zoo model `name`, compiled prefixed (and unprefixed if asked), from cache if there.
    With `twin_as_exported` the unprefixed package is compiled from the program as exported,
    as torch's runner would have it (no math forms: its own FFT kernels, for one)."""
    import torch
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.aot.inductor_options import CPU_INFERENCE_OPTIONS
    from shimkit.aot.weight_layout import linear_weights_column_major

    from tests.models.zoo import ZOO

    options = dict(CPU_INFERENCE_OPTIONS)
    zoo = ZOO[name]()
    exported = torch.export.export(zoo.model, zoo.inputs, dynamic_shapes=zoo.dynamic_shapes)
    # What `shimkit compile` does on the CPU before Inductor, for both packages: the linear
    # weights' layout (shimkit.aot.weight_layout); and unless asked, antialiased resizing,
    # Fourier transforms and complex values in their math form (attention and RNN cells
    # kept): the same program.
    as_exported, _ = linear_weights_column_major(torch, exported)
    exported, _ = in_math_form(torch, as_exported, False, False)
    base = cache / f"{name}-{_digest(exported, options)}"
    prefixed = base.with_suffix(".pt2")
    twin_kind = "as-exported" if twin_as_exported else "unprefixed"
    twin = base.with_name(f"{base.name}.{twin_kind}.pt2")
    tmp = base.with_name(f"{base.name}.tmp{os.getpid()}.pt2")
    if not prefixed.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        compile_exported(exported, tmp, force=True, label=name, show_progress=False)
        os.replace(tmp, prefixed)
    if unprefixed and not twin.is_file():
        # torch's own packaging with the options `shimkit compile` adds (the same blob,
        # unprefixed and linked to libtorch).
        cache.mkdir(parents=True, exist_ok=True)
        with torch.no_grad():
            torch._inductor.aoti_compile_and_package(
                as_exported if twin_as_exported else exported,
                package_path=str(tmp),
                inductor_configs=options,
            )
        os.replace(tmp, twin)
    weights = sum(t.numel() * t.element_size() for t in zoo.model.state_dict().values())
    return Package(
        name,
        prefixed,
        twin if unprefixed else None,
        zoo.inputs,
        zoo.more_inputs,
        zoo.model,
        weights,
        zoo.rtol,
    )
