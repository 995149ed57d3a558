"""Linear weights stored in the layout the CPU GEMMs read fastest.

`nn.Linear` keeps its weight as an [out, in] row-major matrix and computes x @ weight.T, so
the GEMM of every linear layer gets the weight as a transposed operand (BLAS's NT). OpenBLAS,
which the slim CPU shims call below oneDNN's size, packs a transposed operand more slowly
than a plain one, and for the small products of an MLP that is much of the call (this VM, 1
thread: [4 x 16] @ [16 x 32] 139 ns NT against 92 ns NN; a row by a 64 x 64 weight 323 against
118 ns; [8 x 768] @ [768 x 768] 182 against 122 us; no shape measured was more than 10%
slower NN). A weight stored column-major (the same values and sizes, strides (1, out)) has a
contiguous [in, out] transpose: with the weights frozen into constants the blob hands that to
the GEMM as a plain operand. Only the storage order changes: values, shapes and the graph stay
as they are, and the results agree to rounding (a GEMM may sum in another order).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

# What reads a weight as a linear layer's: (op name, index of the weight argument) for
# aten.linear, and for the transpose Inductor's decomposition makes of it, the products
# that read the transpose.
_LINEAR_WEIGHT = ("aten.linear.default", 1)
_TRANSPOSES = ("aten.t.default", "aten.permute.default")
_TRANSPOSE_READERS = {"aten.addmm.default": 2, "aten.mm.default": 1}


def _is_transpose(node: Any) -> bool:
    if node.op != "call_function" or str(node.target) not in _TRANSPOSES:
        return False
    return str(node.target) == "aten.t.default" or list(node.args[1]) in ([1, 0], [-1, -2])


def _reads_at(user: Any, read: Any, op: str, index: int) -> bool:
    """True if `user` is a call of `op` that reads `read` as its argument `index` (only)."""
    return (
        user.op == "call_function"
        and str(user.target) == op
        and len(user.args) > index
        and user.args[index] is read
        and sum(arg is read for arg in user.args) == 1
    )


def _used_only_as_linear_weight(node: Any) -> bool:
    """True if every use of `node` reads it as a linear layer's weight, directly or
    through a transpose that only products read as their right-hand operand."""
    if not node.users:
        return False
    for user in node.users:
        if _reads_at(user, node, *_LINEAR_WEIGHT):
            continue
        if not _is_transpose(user) or not user.users:
            return False
        for reader in user.users:
            if not any(_reads_at(reader, user, *read) for read in _TRANSPOSE_READERS.items()):
                return False
    return True


def _relaid(torch: Any, value: Any) -> Any | None:
    """`value` stored column-major, or None if it is not a 2-D floating matrix worth it."""
    if value.dim() != 2 or not value.is_floating_point() or min(value.shape) < 2:
        return None
    if value.stride() == (1, value.shape[0]):
        return None  # already column-major
    relaid = value.detach().t().contiguous().t()
    if isinstance(value, torch.nn.Parameter):
        return torch.nn.Parameter(relaid, requires_grad=value.requires_grad)
    return relaid


def linear_weights_column_major(torch: Any, exported: Any) -> tuple[Any, int]:
    """(`exported` with each weight that only linear layers read stored column-major, how
    many). The program's state dict entries are replaced, not the tensors in them: the
    model the program was exported from keeps its own parameters as they were. A weight
    that anything else reads too (an embedding table tied to an output layer) stays as
    it is: its other readers may want its rows; so does one whose memory another entry of
    the state dict or the constants shares."""
    signature = exported.graph_signature
    keys = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    state = exported.state_dict
    # A tensor behind two entries (a tied weight, under each of its names) may be read
    # through the other one: relaid under one name, the blob would hold it twice.
    storages = Counter(
        value.untyped_storage().data_ptr()
        for value in [*state.values(), *exported.constants.values()]
        if isinstance(value, torch.Tensor)
    )
    count = 0
    for node in exported.graph.nodes:
        key = keys.get(node.name) if node.op == "placeholder" else None
        if key is None or key not in state or not _used_only_as_linear_weight(node):
            continue
        if storages[state[key].untyped_storage().data_ptr()] > 1:
            continue
        relaid = _relaid(torch, state[key])
        if relaid is not None:
            state[key] = relaid
            count += 1
    return exported, count
