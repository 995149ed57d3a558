"""Rewriting some calls of an op in an exported program, the machinery the math forms share.

A form is an op's decomposition (which returns NotImplemented where it does not apply) and
a check of a call node (static shapes within the form's limits, arguments it covers), so
compile can count the calls it rewrites and leave a program without such calls as it was.
`run_decompositions` traces the whole program once with every form given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Decomposition = Callable[..., Any]
CallCheck = Callable[[Any], bool]

# The most elements a dense form's widest intermediate (its comparison mask or pairwise
# values) may have: 16 MiB of float32. Calls above it keep their fallback.
DENSE_LIMIT = 4 * 1024 * 1024


def input_shape(node: Any, index: int = 0) -> tuple[Any, ...] | None:
    """The shape of a call's tensor argument `index` as traced (None when it has none)."""
    value = node.args[index].meta.get("val") if index < len(node.args) else None
    return tuple(value.shape) if value is not None and hasattr(value, "shape") else None


def floating_input(node: Any) -> bool:
    """Whether a call's first argument, as traced, is a floating-point tensor."""
    value = node.args[0].meta.get("val")
    return value is not None and value.is_floating_point()


def float32_input(node: Any) -> bool:
    """Whether a call's first argument, as traced, is a float32 tensor."""
    value = node.args[0].meta.get("val")
    return value is not None and str(value.dtype) == "torch.float32"


def static_numel(shape: tuple[Any, ...] | None) -> int | None:
    """The element count of a shape whose sizes are all ints (None for a dynamic one)."""
    if shape is None or any(type(size) is not int for size in shape):
        return None
    count = 1
    for size in shape:
        count *= size
    return count


def computation_dtypes(torch: Any, result: Any) -> tuple[Any, Any]:
    """(the type ATen's CUDA kernels compute in, the result's type) for an elementwise
    function whose result has type `result`: float64 for float64, float32 for the rest (an
    integer type promoted to the default floating-point type, as torch does)."""
    if not result.is_floating_point:
        result = torch.get_default_dtype()
    return (torch.float64 if result == torch.float64 else torch.float32), result


def argument(node: Any, index: int, name: str, default: Any) -> Any:
    """A call's argument by position or keyword, or its schema default."""
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[index] if index < len(node.args) else default


def _applicable_calls(exported: Any, checks: dict[Any, CallCheck]) -> list[Any]:
    """The call nodes of `exported` whose op has a check that the call passes."""
    return [
        node
        for node in exported.graph.nodes
        if node.op == "call_function" and node.target in checks and checks[node.target](node)
    ]


def rewrite_calls(
    exported: Any,
    forms: dict[Any, tuple[Decomposition, CallCheck]],
    in_place: dict[Any, Any] | None = None,
) -> tuple[Any, int]:
    """(`exported` with every call that passes its op's check in the op's form, how many
    calls that was). A program without such calls is returned as it was, untraced.
    `in_place`: in-place variants of the forms' ops (export keeps `x.scatter_(...)` as
    itself) mapped to their functional op; a call of one counts with that op's check, and
    `run_decompositions`, which makes it functional first, gives it that op's form."""
    checks = {op: check for op, (_, check) in forms.items()}
    for variant, functional in (in_place or {}).items():
        checks[variant] = checks[functional]
    calls = _applicable_calls(exported, checks)
    if not calls:
        return exported, 0
    table = {op: decomposition for op, (decomposition, _) in forms.items()}
    return exported.run_decompositions(table), len(calls)
