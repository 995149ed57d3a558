"""Values a program computes from sizes alone, computed once at compile time instead.

The math forms (`shimkit.aot.fft`, `shimkit.aot.antialias`) build their matrices in the
program from its static sizes (arange, trigonometry, gathers), on the input's device.
Inductor folds constants that derive from the weights, but not values made by factory
functions alone: it would compute such a matrix at every run (measured: a third of an STFT
model's time went to `sin` and `cos`). `fold_size_only_values` evaluates each of them once
and hands it to the program as a constant (`InputKind.CONSTANT_TENSOR`), as torch.export
lifts a tensor constant of the model.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

# Values larger than this stay computed at run time: a constant is stored in the blob.
MAX_FOLDED_BYTES = 16 << 20


def _is_check(torch: ModuleType, node: Any) -> bool:
    """A metadata assertion (export records one after a dtype conversion): of a size-only
    value, it holds or fails at compile time, when the value is evaluated."""
    return node.target == torch.ops.aten._assert_tensor_metadata.default


def _size_only(torch: ModuleType, graph: Any) -> set[Any]:
    """The call nodes that read no input of the program (directly or through others), have
    no side effects but checks and draw no random numbers."""
    found: set[Any] = set()
    for node in graph.nodes:
        if node.op != "call_function" or (node.is_impure() and not _is_check(torch, node)):
            continue
        tags = getattr(node.target, "tags", ())
        if torch.Tag.nondeterministic_seeded in tags:
            continue
        if all(arg in found for arg in node.all_input_nodes):
            found.add(node)
    return found


def _foldable(torch: ModuleType, node: Any) -> bool:
    """A tensor of at most MAX_FOLDED_BYTES, judged by its recorded (fake) value."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return False
    try:
        return int(value.numel()) * value.element_size() <= MAX_FOLDED_BYTES
    except (TypeError, RuntimeError):  # a symbolic size: not a constant
        return False


def _with_ancestors(nodes: list[Any]) -> set[Any]:
    found: set[Any] = set()
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if node not in found:
            found.add(node)
            pending.extend(node.all_input_nodes)
    return found


def _evaluate(torch: ModuleType, graph: Any, nodes: set[Any]) -> dict[Any, Any]:
    values: dict[Any, Any] = {}
    for node in graph.nodes:
        if node in nodes:
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
            values[node] = node.target(*args, **kwargs)
    return values


def fold_size_only_values(torch: ModuleType, exported: Any, prefix: str) -> int:
    """Evaluates, in place, every tensor `exported` computes from sizes alone and feeds to
    the rest of the program, and makes it a constant of the program (named `prefix`_N);
    returns how many."""
    from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

    graph = exported.graph_module.graph
    size_only = _size_only(torch, graph)
    used = [
        n
        for n in graph.nodes  # in the graph's order: the constants' names are stable
        if n in size_only and any(user not in size_only for user in n.users) and _foldable(torch, n)
    ]
    if not used:
        return 0
    # Only what the folded values need is evaluated, and the checks of those values.
    needed = _with_ancestors(used)
    checks = [
        n
        for n in graph.nodes
        if n in size_only and _is_check(torch, n) and all(a in needed for a in n.all_input_nodes)
    ]
    values = _evaluate(torch, graph, needed | set(checks))
    specs = exported.graph_signature.input_specs
    first_input = next(
        (i for i, spec in enumerate(specs) if spec.kind == InputKind.USER_INPUT), len(specs)
    )
    # The new inputs go before the first user input (the order of input_specs).
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = (
        placeholders[first_input]
        if first_input < len(placeholders)
        else next(n for n in graph.nodes if n.op != "placeholder")
    )
    taken = {n.name for n in graph.nodes} | set(exported.constants)
    folded = 0
    for node in used:
        value = values[node]
        name = next(f"{prefix}_{i}" for i in range(len(taken) + 1) if f"{prefix}_{i}" not in taken)
        taken.add(name)
        with graph.inserting_before(anchor):
            placeholder = graph.placeholder(name)
        placeholder.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(placeholder)
        specs.insert(
            first_input + folded,
            InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target=name),
        )
        exported.constants[name] = value.clone()  # its own storage, the strides kept
        folded += 1
    for node in checks:
        graph.erase_node(node)  # evaluated above: it held
    graph.eliminate_dead_code()
    exported.graph_module.recompile()
    return folded
