"""Test blobs for the runtime: examples/models compiled with `shimkit compile`'s API.

Each case is a prefixed .pt2 plus inputs and eager outputs (.npz). A case is
rebuilt only when its model file, the rename header, the prefix file or torch
change (cached under build/runtime-test-blobs/, shared by tests and bench).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"
CACHE = ROOT / "build" / "runtime-test-blobs"


# Bump when a change here alters what a case compiles to.
_CACHE_VERSION = "3"


@dataclass(frozen=True)
class BlobCase:
    name: str
    pt2: Path
    inputs: list[np.ndarray]
    expected: list[np.ndarray]


# name -> (model file, wrapper applied to the model, prefixed?)
CASES: dict[str, tuple[str, str, bool]] = {
    "mlp": ("mlp.py", "none", True),
    "convnet_cl": ("convnet.py", "channels_last", True),
    "topk": ("topk.py", "none", True),
    "mlp_unprefixed": ("mlp.py", "none", False),
    "convnet_cl_unprefixed": ("convnet.py", "channels_last", False),
}
# What the runtime tests compile (the bench adds the conv net's unprefixed twin).
TEST_CASES = ["mlp", "convnet_cl", "topk", "mlp_unprefixed"]


def _wrap(torch: Any, model: Any, how: str) -> Any:
    if how == "none":
        return model

    class ChannelsLast(torch.nn.Module):
        """Runs the wrapped conv net on a channels_last copy of its input."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: Any) -> Any:
            return self.inner(x.contiguous(memory_format=torch.channels_last))

    return ChannelsLast(model).eval()


def _key(name: str) -> str:
    import torch

    model_file, how, prefixed = CASES[name]
    digest = hashlib.sha256()
    for part in (
        (MODELS / model_file).read_bytes(),
        (ROOT / "shims" / "aoti_shim_rename.h").read_bytes(),
        (ROOT / "rules" / "shim_symbol_prefix.bzl").read_bytes(),
        f"{torch.__version__}|{how}|{prefixed}".encode(),
        _CACHE_VERSION.encode(),
    ):
        digest.update(part)
    return digest.hexdigest()[:12]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def build_case(name: str, cache: Path = CACHE) -> BlobCase:
    """The compiled case `name`, compiling it if the cache lacks it."""
    import torch
    from shimkit.aot.compile import compile_model
    from shimkit.aot.modelfile import load_model_file

    model_file, how, prefixed = CASES[name]
    base = cache / f"{name}-{_key(name)}"
    pt2, data = base.with_suffix(".pt2"), base.with_suffix(".npz")
    if not (pt2.is_file() and data.is_file()):
        cache.mkdir(parents=True, exist_ok=True)
        loaded = load_model_file(MODELS / model_file, torch)
        model, inputs = loaded.model, loaded.inputs
        model = _wrap(torch, model, how)
        with torch.no_grad():
            expected = [t.numpy() for t in _as_list(model(*inputs))]
        tmp = base.with_name(base.name + f".tmp{os.getpid()}.pt2")
        if prefixed:
            compile_model(model, inputs, tmp, force=True, show_progress=False)
        else:
            # torch's packaging with the options and the weight layout `shimkit compile`
            # adds: the same blob, unprefixed, for torch's own runner.
            from shimkit.aot.inductor_options import CPU_INFERENCE_OPTIONS
            from shimkit.aot.weight_layout import linear_weights_column_major

            exported, _ = linear_weights_column_major(
                torch, torch.export.export(model, tuple(inputs))
            )
            with torch.no_grad():
                torch._inductor.aoti_compile_and_package(
                    exported, package_path=str(tmp), inductor_configs=dict(CPU_INFERENCE_OPTIONS)
                )
        np.savez(
            data,
            **{f"in{i}": t.numpy() for i, t in enumerate(inputs)},
            **{f"out{i}": a for i, a in enumerate(expected)},
        )
        os.replace(tmp, pt2)
    stored = np.load(data)
    ins = sorted((k for k in stored.files if k.startswith("in")), key=lambda k: int(k[2:]))
    outs = sorted((k for k in stored.files if k.startswith("out")), key=lambda k: int(k[3:]))
    return BlobCase(name, pt2, [stored[k] for k in ins], [stored[k] for k in outs])
