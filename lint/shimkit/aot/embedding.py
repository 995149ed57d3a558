"""Embedding lookups with a norm limit in their math form (`nn.Embedding(max_norm=...)`).

Such a lookup first renormalises, in place, the weight's rows it looks up
(`aten.embedding_renorm_`: each row whose p-norm exceeds max_norm is scaled by
max_norm / (norm + 1e-7)), then gathers them. No torch has a C shim for the renorm, so
Inductor compiled it through libtorch's proxy executor, which slim runtimes lack, and compile
refused such models. Compile rewrites the pair into the lookup followed by the same scaling
of each looked-up row: the outputs are ATen's.

What it does not do is write the scaled rows back into the weight. Eager PyTorch does, so its
later calls read rows already at most max_norm / (1 + 1e-7 / norm) long, which the check
leaves alone: those calls differ from the compiled model's by that factor, under 1e-7
relative. The rewrite applies where the weight is used by that one lookup alone. A weight
also read elsewhere (tied to an output projection, looked up twice) would see the write-back
in eager PyTorch, so such a program is left as it is, and the check names the op.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.torchenv import torch_has_c_shim

# ATen's embedding_renorm_: scale = max_norm / (norm + EPSILON) where norm > max_norm.
EPSILON = 1e-7


def _source(torch: ModuleType, node: Any) -> Any:
    """The node `node` views through detach/alias calls."""
    aten = torch.ops.aten
    while node.op == "call_function" and node.target in (aten.detach.default, aten.alias.default):
        node = node.args[0]
    return node


def _readers(torch: ModuleType, source: Any) -> list[Any]:
    """Every node reading `source`, through detach/alias views."""
    aten = torch.ops.aten
    found, pending = [], list(source.users)
    while pending:
        node = pending.pop()
        if node.op == "call_function" and node.target in (aten.detach.default, aten.alias.default):
            pending.extend(node.users)
        else:
            found.append(node)
    return found


def _rewrite(torch: ModuleType, graph: Any, renorm: Any) -> bool:
    """Replaces `renorm` and its lookup by the lookup and a scaling; False (the graph
    untouched) where the weight has other readers than the two."""
    aten = torch.ops.aten
    weight, indices, max_norm, norm_type = renorm.args
    readers = _readers(torch, _source(torch, weight))
    lookups = [n for n in readers if n.target == aten.embedding.default]
    if len(readers) != 2 or len(lookups) != 1 or lookups[0].args[1] is not indices:
        return False
    (lookup,) = lookups
    order = {node: i for i, node in enumerate(graph.nodes)}
    if order[lookup] < order[renorm]:
        return False
    with graph.inserting_before(lookup.next):
        call = graph.call_function
        norms = call(aten.linalg_vector_norm.default, (lookup, float(norm_type), [-1], True))
        limit = call(aten.mul.Tensor, (call(aten.reciprocal.default,
                     (call(aten.add.Tensor, (norms, EPSILON)),)), float(max_norm)))  # fmt: skip
        too_long = call(aten.gt.Scalar, (norms, float(max_norm)))
        scale = call(aten.where.ScalarOther, (too_long, limit, 1.0))
        scaled = call(aten.mul.Tensor, (lookup, scale))
    lookup.replace_all_uses_with(scaled, delete_user_cb=lambda user: user not in (norms, scaled))
    graph.erase_node(renorm)
    return True


def embedding_renorm_in_math_form(
    torch: ModuleType, exported: Any, only_without_shim: bool = True
) -> tuple[Any, int]:
    """(`exported` with every norm-limited embedding lookup in its math form, how many were
    rewritten). With `only_without_shim` (the default) it is left alone when the installed
    torch has a C shim for `embedding_renorm`."""
    if only_without_shim and torch_has_c_shim("aten.embedding_renorm.default"):
        return exported, 0
    graph = exported.graph_module.graph
    renorms = [
        n
        for n in graph.nodes
        if n.op == "call_function" and n.target == torch.ops.aten.embedding_renorm_.default
    ]
    count = sum(_rewrite(torch, graph, renorm) for renorm in renorms)
    if not count:
        return exported, 0
    graph.eliminate_dead_code()
    exported.graph_module.recompile()
    # Traced again: the new nodes get their metadata (shapes, dtypes) as exported ones have.
    return exported.run_decompositions({}), count
