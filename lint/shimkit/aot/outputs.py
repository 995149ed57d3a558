"""Inductor's output shapes against the exported program's, watched while AOTInductor compiles.

A blob hands each output back in the shape of the IR node Inductor lowered it to; the
exported program (and eager) promise the shape in the FX graph's metadata. The two
should always agree. When they do not (torch 2.11's CUDA lowering of an LSTM's final cell
state: [2, 1, 3, 32] for [2, 3, 32], docs/benchmarks.md), every runner of the blob,
torch's own included, returns the compiled shape, so the package is not the program it
was exported from. `shimkit compile` watches the point where Inductor pairs each FX
output with its IR node (GraphLowering.output) and reports every output whose rank or
static sizes differ, by index, with both shapes. Symbolic sizes are compared only by
rank: two expressions Inductor cannot prove equal may still be equal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class ShapeDisagreement:
    index: int  # the output's position in the compiled graph's outputs
    name: str  # the FX node the output comes from
    compiled: tuple[str, ...]  # Inductor's sizes (what every runner returns)
    exported: tuple[str, ...]  # the exported program's

    def line(self, label: str) -> str:
        return (
            f"{label}: output {self.index} ({self.name}) is compiled as "
            f"[{', '.join(self.compiled)}] where the exported program gives "
            f"[{', '.join(self.exported)}]: Inductor's lowering, so every runner of this "
            "package (torch's too) returns the compiled shape; reshape it to the exported one"
        )


def _static(size: Any) -> int | None:
    """`size` as an int when it is a constant (int or sympy Integer), else None."""
    if isinstance(size, int):
        return size
    if getattr(size, "is_Integer", False):
        return int(size)
    return None


def _differ(compiled: list[Any], exported: list[Any]) -> bool:
    if len(compiled) != len(exported):
        return True
    for a, b in zip(compiled, exported, strict=True):
        x, y = _static(a), _static(b)
        if x is not None and y is not None and x != y:
            return True
    return False


def disagreements(torch: ModuleType, graph: Any) -> list[ShapeDisagreement]:
    """The outputs of `graph` (a GraphLowering whose output node was just lowered) whose
    IR shape differs from its FX node's metadata."""
    fx_outputs = graph.current_node.args[0]
    if not isinstance(fx_outputs, (tuple, list)):
        fx_outputs = (fx_outputs,)
    found = []
    for index, (ir_node, fx_node) in enumerate(zip(graph.graph_outputs, fx_outputs, strict=False)):
        value = fx_node.meta.get("val") if isinstance(fx_node, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or not hasattr(ir_node, "get_size"):
            continue
        exported = [s.node.expr if isinstance(s, torch.SymInt) else int(s) for s in value.shape]
        compiled = list(ir_node.get_size())
        if _differ(compiled, exported):
            found.append(
                ShapeDisagreement(
                    index=index,
                    name=fx_node.name,
                    compiled=tuple(str(s) for s in compiled),
                    exported=tuple(str(s) for s in exported),
                )
            )
    return found


@contextlib.contextmanager
def watch_output_shapes(torch: ModuleType) -> Iterator[list[ShapeDisagreement]]:
    """While open, every graph Inductor lowers has its outputs compared (`disagreements`);
    the list it yields collects what differs. Without GraphLowering.output (another torch)
    nothing is watched. A failure of the comparison itself never fails the compile."""
    found: list[ShapeDisagreement] = []
    try:
        from torch._inductor.graph import GraphLowering
    except ImportError:
        yield found
        return
    original = getattr(GraphLowering, "output", None)
    if original is None:
        yield found
        return

    def output(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):
            found.extend(disagreements(torch, self))
        return result

    GraphLowering.output = output
    try:
        yield found
    finally:
        GraphLowering.output = original
