"""Compiling a model as `shimkit compile` does on the CPU (math forms first) and running it on
the slim CPU runtime: what the math-form tests share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class SlimRun:
    notes: list[str]  # what in_math_form said it rewrote
    imports: list[str]  # the blob's imported symbols
    outputs: list[np.ndarray]  # the slim runtime's outputs on the example inputs


def calls_of(program: Any, targets: tuple[str, ...]) -> list[str]:
    """The calls of `program` (an exported program) to any of `targets` ("aten.op.overload")."""
    return [
        str(n.target)
        for n in program.graph.nodes
        if n.op == "call_function" and str(n.target) in targets
    ]


def compile_in_math_form_and_run(
    torch: Any, model: Any, inputs: tuple[Any, ...], out: Path
) -> SlimRun:
    """`model` exported on `inputs`, its fallbacks rewritten as `shimkit compile` rewrites
    them on the CPU (in_math_form: attention and RNN cells kept), compiled into `out` for the
    slim CPU runtime, and run there on `inputs`."""
    from shimkit.aot.compile import in_math_form

    exported, notes = in_math_form(torch, torch.export.export(model, inputs), False, False)
    return compile_and_run(exported, inputs, out, notes)


def compile_and_run(
    program: Any, inputs: tuple[Any, ...], out: Path, notes: list[str] | None = None
) -> SlimRun:
    """An exported `program` (already in the form under test) compiled into `out` for the
    slim CPU runtime and run there on `inputs`."""
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported

    result = compile_exported(program, out, force=True, show_progress=False)
    imports = [sym.name for blob in result.blobs.values() for sym in blob.imports]
    with shimkit.runtime.load(result.path) as slim:
        outputs = slim(*inputs)
    return SlimRun(notes or [], imports, outputs)
