"""QR of small matrices by Householder reflections, as LAPACK computes it, for the slim
targets (shimkit.aot.linalg writes the calls; this module has the steps).

`torch.linalg.qr` (and the older `torch.qr`) has no C shim in any torch: a blob with it
calls libtorch's proxy executor. Models call it on data to orthonormalise a few vectors (a
frame from two directions, a basis for a subspace, a whitening step). For a matrix of static
size m x n, both at most `linalg.SIZE_LIMIT`, the factorisation is min(m, n)
reflections, each a handful of reductions and elementwise ops, so Inductor generates the
kernels on either device. Every reflection is the same ops on the whole matrix, its row and
column given by masks that move one place a step, so the graph holds one in a loop
(`shimkit.aot.loop`); forming Q is a second loop, the reflections taken back in reverse. The
reflections are LAPACK's (geqrf's dlarfg: R's diagonal entry takes the sign opposite to the
column's leading entry, no reflection where the column below it is already zero), and Q is
formed from them as orgqr forms it; so Q and R are torch's, signs included, to rounding.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot import loop


def _reflected(v: Any, tau: Any, a: Any) -> Any:
    """(I - tau v v^T) a, for v [..., m], tau [..., 1] and a [..., m, c]: where v is zero
    (the rows above the reflection's), a's rows stay as they are."""
    v = v.unsqueeze(-1)
    return a - tau.unsqueeze(-1) * v * (v * a).sum(-2, keepdim=True)


def qr(torch: ModuleType, a: Any, q_columns: int | None, r_rows: int) -> tuple[Any, Any]:
    """(Q [..., m, q_columns], R [..., r_rows, n]) of `a` [..., m, n]; `q_columns` None: no Q
    (an empty tensor, as torch's mode 'r' gives)."""
    m, n = a.shape[-2], a.shape[-1]
    count = min(m, n)
    rows = torch.arange(m, device=a.device)
    columns = torch.arange(n, device=a.device)

    # Step k's row and column, as masks moved one place a step (the step holds no index).
    def reflect(r: Any, vectors: Any, taus: Any, *at: Any) -> tuple[Any, ...]:
        row_k, below_k, column_k, after_k = at
        column = loop.picked(torch, r, column_k)  # [..., m]
        alpha = loop.picked(torch, column, row_k, keepdim=True)
        tail = torch.where(below_k, column, 0.0)
        # LAPACK's dlarfg: no reflection (tau 0) where the tail is zero, the last row's
        # single entry included.
        tail_norm = tail.norm(dim=-1, keepdim=True)
        none = tail_norm == 0
        length = torch.hypot(alpha, tail_norm)
        beta = torch.where(none, alpha, torch.where(alpha >= 0, -length, length))
        tau = torch.where(none, 0.0, (beta - alpha) / beta)
        scale = torch.where(none, 0.0, 1.0 / (alpha - beta))
        v = torch.where(row_k, 1.0, tail * scale)
        reduced = torch.where(row_k, beta, torch.where(below_k, 0.0, column))
        r = torch.where(
            after_k, _reflected(v, tau, r), torch.where(column_k, reduced.unsqueeze(-1), r)
        )
        kept = column_k[:count]
        vectors = torch.where(kept, v.unsqueeze(-1), vectors)
        taus = torch.where(kept, tau, taus)
        return r, vectors, taus, *(loop.shifted(torch, mask) for mask in at)

    batch = a.shape[:-2]
    r, vectors, taus, *_ = loop.repeated(
        torch,
        reflect,
        count,
        a,
        a.new_zeros((*batch, m, count)),
        a.new_zeros((*batch, count)),
        rows == 0,
        rows > 0,
        columns == 0,
        columns > 0,
    )
    r = r[..., :r_rows, :]
    if q_columns is None:
        return torch.empty(0, dtype=a.dtype, device=a.device), r

    # orgqr: Q = H_0 H_1 ... H_{k-1} applied to the first columns of the identity, the last
    # reflection first.
    def unreflect(basis: Any, column_k: Any, vectors: Any, taus: Any) -> tuple[Any, Any]:
        v = loop.picked(torch, vectors, column_k)
        tau = loop.picked(torch, taus, column_k, keepdim=True)
        return _reflected(v, tau, basis), loop.shifted(torch, column_k, forward=False)

    eye = torch.eye(m, q_columns, dtype=a.dtype, device=a.device).expand(*batch, m, q_columns)
    last = torch.arange(count, device=a.device) == count - 1
    return loop.repeated(torch, unreflect, count, eye, last, reads=(vectors, taus))[0], r
