"""A step repeated a fixed number of times as one loop in an exported graph, for the math
forms whose steps are all alike (shimkit.aot.jacobi's rotations, .householder's reflections,
.linalg's LU eliminations, substitutions and Cholesky columns, .incomplete_gamma's terms), and
the two helpers by which such a step addresses a position without holding an index: a
position mask moved one place a step (`shifted`) and the entries at it (`picked`).

Written out one after another, n steps are n copies of their ops, and Inductor's compile
time grows with them (a 16-column SVD took minutes). As a while_loop, the graph holds the step
once: Inductor generates its kernels once and the wrapper runs them `count` times. The count
is a CPU tensor on every device, so testing it reads no GPU memory: a device sync would break
CUDA graph capture, under which the loop instead unrolls into the captured graph. A few
steps are written out all the same: Inductor compiles them quickly, and the loop's own cost,
about 2 us a step on the slim CPU runtime (its carried buffers allocated and handed over), is
saved. Measured on a model with the QRs of a 3 x 2 and a 12 x 5 matrix (Q complete): 63 us a
call with every step written out, 100 us with both QRs looped, 84 us with the 3 x 2 one's two
reflections written out.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

# Up to this many steps are written out one after another instead of looped.
WRITTEN_OUT = 4


def repeated(
    torch: ModuleType,
    step: Callable[..., tuple[Any, ...]],
    count: int,
    *carried: Any,
    reads: tuple[Any, ...] = (),
) -> tuple[Any, ...]:
    """`step` applied `count` times to `carried` (tensors; `step` returns as many, of the same
    shapes and dtypes), each time given `reads` too: tensors it only reads (a loop's function
    may not close over the graph's tensors)."""
    if count <= WRITTEN_OUT:
        for _ in range(count):
            carried = tuple(step(*carried, *reads))
        return carried
    # The operator itself: torch.while_loop traces its functions with dynamo, which reuses
    # a frame traced for an earlier program (a second program's loop then fails export's
    # checks); here the caller is already being traced.
    from torch._higher_order_ops.while_loop import while_loop_op

    def more(done: Any, *_: Any) -> Any:
        return done < count

    def body(done: Any, *values: Any) -> tuple[Any, ...]:
        return (done + 1, *step(*values))  # `reads` last, as the loop passes them

    counter = torch.zeros((), dtype=torch.int64)
    # Copies: the loop's carried values may not alias one another (torch refuses the loop).
    owned = tuple(value.clone() for value in carried)
    return tuple(while_loop_op(more, body, (counter, *owned), tuple(reads)))[1:]


def shifted(torch: ModuleType, mask: Any, forward: bool = True) -> Any:
    """`mask` [k] moved one place later (or earlier), False coming in: a step's position,
    carried from one step to the next (the step's ops hold no index)."""
    none = torch.zeros_like(mask[:1])
    return torch.cat([none, mask[:-1]]) if forward else torch.cat([mask[1:], none])


def picked(
    torch: ModuleType, values: Any, at: Any, rows: bool = False, keepdim: bool = False
) -> Any:
    """The entries of `values` at the one True place of the position mask `at`: along the
    last dim (a matrix's column `at`), or with `rows` along the one before (its row `at`). A
    masked sum, so the step holds no index; a -0.0 entry comes back as +0.0."""
    mask = at.unsqueeze(-1) if rows else at
    return torch.where(mask, values, 0).sum(-2 if rows else -1, keepdim=keepdim)
