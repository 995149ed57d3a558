"""QR of small matrices by Householder reflections, as LAPACK computes it, for the slim
targets (shimkit.aot.linalg writes the calls; this module has the steps).

`torch.linalg.qr` (and the older `torch.qr`) has no C shim in any torch: a blob with it calls
libtorch's proxy executor. Models call it on data to orthonormalise a few vectors (a frame
from two directions, a basis for a subspace, a whitening step). For a matrix of static size
m x n, both at most `linalg.SIZE_LIMIT`, the factorisation is min(m, n) reflections written
out, each a handful of reductions and elementwise ops, so Inductor generates the kernels on
either device. The reflections are LAPACK's (geqrf's dlarfg: R's diagonal entry takes the
sign opposite to the column's leading entry, no reflection where the column below it is
already zero), and Q is formed from them as orgqr forms it; so Q and R are torch's, signs
included, to rounding.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any


def _reflector(torch: ModuleType, column: Any) -> tuple[Any, Any, Any]:
    """LAPACK's dlarfg for `column` [..., r]: (v [..., r] with v[0] = 1, tau [..., 1], beta
    [..., 1]) with (I - tau v v^T) column = (beta, 0, ..., 0)."""
    alpha, tail = column[..., :1], column[..., 1:]
    if tail.shape[-1] == 0:  # a single entry: no reflection (tau 0), as dlarfg
        return torch.ones_like(alpha), torch.zeros_like(alpha), alpha
    tail_norm = tail.norm(dim=-1, keepdim=True)
    none = tail_norm == 0
    length = torch.hypot(alpha, tail_norm)
    beta = torch.where(none, alpha, torch.where(alpha >= 0, -length, length))
    tau = torch.where(none, 0.0, (beta - alpha) / beta)
    scale = torch.where(none, 0.0, 1.0 / (alpha - beta))
    return torch.cat([torch.ones_like(alpha), tail * scale], -1), tau, beta


def _reflect(v: Any, tau: Any, column: Any) -> Any:
    """(I - tau v v^T) `column`, both [..., r]."""
    return column - tau * v * (v * column).sum(-1, keepdim=True)


def qr(torch: ModuleType, a: Any, q_columns: int | None, r_rows: int) -> tuple[Any, Any]:
    """(Q [..., m, q_columns], R [..., r_rows, n]) of `a` [..., m, n]; `q_columns` None: no Q
    (an empty tensor, as torch's mode 'r' gives)."""
    m, n = a.shape[-2], a.shape[-1]
    columns = [a[..., :, j] for j in range(n)]
    reflectors = []
    for k in range(min(m, n)):
        v, tau, beta = _reflector(torch, columns[k][..., k:])
        below = torch.zeros_like(columns[k][..., k + 1 :])
        columns[k] = torch.cat([columns[k][..., :k], beta, below], -1)
        for j in range(k + 1, n):
            columns[j] = torch.cat([columns[j][..., :k], _reflect(v, tau, columns[j][..., k:])], -1)
        reflectors.append((k, v, tau))
    r = torch.stack(columns, -1)[..., :r_rows, :]
    if q_columns is None:
        return torch.empty(0, dtype=a.dtype, device=a.device), r
    # orgqr: Q = H_0 H_1 ... H_{k-1} applied to the first columns of the identity.
    eye = torch.eye(m, q_columns, dtype=a.dtype, device=a.device).expand(
        *a.shape[:-2], m, q_columns
    )
    basis = [eye[..., :, j] for j in range(q_columns)]
    for k, v, tau in reversed(reflectors):
        basis = [
            torch.cat([column[..., :k], _reflect(v, tau, column[..., k:])], -1) for column in basis
        ]
    return torch.stack(basis, -1), r
