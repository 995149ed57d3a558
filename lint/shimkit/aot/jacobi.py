"""SVD and symmetric eigendecomposition of small matrices by Jacobi rotations, for the slim
targets (shimkit.aot.linalg writes the calls; this module has the steps).

`torch.linalg.svd`, `svdvals`, `eigh`, `eigvalsh` (and the older `torch.svd`) have no C
shim in any torch. Point-cloud and pose models call them on data: the Kabsch alignment of
two point sets is the SVD of a 3x3 covariance; whitening takes the eigenvectors of one. For
matrices of a static size whose smaller side is at most `JACOBI_SIZE_LIMIT` (eigh: square
ones), they become `SWEEPS`
cyclic sweeps of rotations (each rotation a handful of elementwise ops, so Inductor
generates the kernels on either device), which converge quadratically: for these sizes a
sweep or two past convergence leaves the rest as exact identity rotations.

- eigh: two-sided Jacobi on the symmetric matrix the `UPLO` triangle gives; eigenvalues
  ascending, the eigenvectors as columns, as torch returns them.
- svd: one-sided (Hestenes) Jacobi: the columns of A rotated until orthogonal; the singular
  values are their norms, descending, U the normalised columns, V the accumulated rotations.
  A matrix of more columns than rows is transposed first, so the rotations act on at most
  `JACOBI_SIZE_LIMIT` columns (a 16 x 3 or a 3 x 16 matrix). U is then made orthonormal
  and, for the full SVD, completed to a square basis by a Householder QR of it
  (`shimkit.aot.householder`): where a singular value is zero the rotated column is zero,
  and LAPACK's U has a unit vector there (a Kabsch alignment of coplanar points needs it).

Singular vectors and eigenvectors are unique only up to sign (and within a repeated value,
up to rotation); LAPACK's choice is not specified, and these may differ from it, as torch's
documentation warns for its own backends. Products that do not depend on the choice (U Vh,
V diag(L) V^T, the reconstruction) agree with LAPACK's to rounding.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot import householder

# Jacobi's work grows with the square of the matrix side per sweep, unrolled: kept to the
# small matrices models call these on (3x3 covariances, 4x4 poses).
JACOBI_SIZE_LIMIT = 4
SWEEPS = 8


def _rotation(torch: ModuleType, apq: Any, app: Any, aqq: Any) -> tuple[Any, Any]:
    """(c, s) of the rotation that zeroes `apq` between diagonal entries `app` and `aqq`
    (Rutishauser's stable form; no rotation where `apq` is already zero)."""
    theta = (aqq - app) / (2 * apq)
    sign = torch.where(theta >= 0, 1.0, -1.0).to(apq.dtype)
    t = sign / (theta.abs() + (theta * theta + 1).sqrt())
    t = torch.where(apq == 0, torch.zeros_like(t), t)
    c = (t * t + 1).rsqrt()
    return c, t * c


def eigh(torch: ModuleType, a: Any, lower: bool) -> tuple[Any, Any]:
    """(eigenvalues ascending [..., n], eigenvectors as columns [..., n, n]) of the symmetric
    matrix the lower (or upper) triangle of `a` gives."""
    n = a.shape[-1]
    m = [[a[..., max(i, j), min(i, j)] if lower else a[..., min(i, j), max(i, j)]
          for j in range(n)] for i in range(n)]  # fmt: skip
    one = torch.ones(a.shape[:-2], dtype=a.dtype, device=a.device)
    v = [[one if i == j else one * 0 for j in range(n)] for i in range(n)]
    for _ in range(SWEEPS):
        for p in range(n - 1):
            for q in range(p + 1, n):
                c, s = _rotation(torch, m[p][q], m[p][p], m[q][q])
                for r in range(n):  # columns p and q: M J
                    mp, mq = m[r][p], m[r][q]
                    m[r][p], m[r][q] = c * mp - s * mq, s * mp + c * mq
                for r in range(n):  # rows p and q: J^T M J
                    mp, mq = m[p][r], m[q][r]
                    m[p][r], m[q][r] = c * mp - s * mq, s * mp + c * mq
                for r in range(n):
                    vp, vq = v[r][p], v[r][q]
                    v[r][p], v[r][q] = c * vp - s * vq, s * vp + c * vq
    values = torch.stack([m[i][i] for i in range(n)], -1)
    vectors = torch.stack([torch.stack(row, -1) for row in v], -2)
    values, order = torch.sort(values, dim=-1, stable=True)
    return values, vectors.gather(-1, order.unsqueeze(-2).expand(vectors.shape))


def svd(torch: ModuleType, a: Any, full_matrices: bool = False) -> tuple[Any, Any, Any]:
    """(U [..., m, m or k], S descending [..., k], Vh [..., k or n, n]) of `a` [..., m, n],
    k = min(m, n): the reduced SVD, or with `full_matrices` the full one (they are the same
    for a square `a`). A wide `a` is the transpose of its transpose's SVD, so the rotations
    always act on the fewer columns."""
    if a.shape[-2] < a.shape[-1]:
        u, values, vh = _tall_svd(torch, a.transpose(-2, -1), full_matrices)
        return vh.transpose(-2, -1), values, u.transpose(-2, -1)
    return _tall_svd(torch, a, full_matrices)


def _tall_svd(torch: ModuleType, a: Any, full_matrices: bool) -> tuple[Any, Any, Any]:
    """svd of `a` [..., m, n] with m >= n."""
    n = a.shape[-1]
    columns = [a[..., :, j] for j in range(n)]
    eye = torch.eye(n, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], n, n)
    basis = [eye[..., :, j] for j in range(n)]  # columns of V
    for _ in range(SWEEPS):
        for p in range(n - 1):
            for q in range(p + 1, n):
                alpha = (columns[p] * columns[p]).sum(-1, keepdim=True)
                beta = (columns[q] * columns[q]).sum(-1, keepdim=True)
                gamma = (columns[p] * columns[q]).sum(-1, keepdim=True)
                c, s = _rotation(torch, gamma, alpha, beta)
                for pair in (columns, basis):
                    xp, xq = pair[p], pair[q]
                    pair[p], pair[q] = c * xp - s * xq, s * xp + c * xq
    norms = torch.stack([col.norm(dim=-1) for col in columns], -1)  # [..., n]
    u = torch.stack(columns, -1) / torch.where(norms == 0, 1.0, norms).unsqueeze(-2)
    v = torch.stack(basis, -1)
    values, order = torch.sort(norms, dim=-1, descending=True, stable=True)
    u = u.gather(-1, order.unsqueeze(-2).expand(u.shape))
    v = v.gather(-1, order.unsqueeze(-2).expand(v.shape))
    u = _orthonormal_basis(torch, u, a.shape[-2] if full_matrices else n)
    return u, values, v.transpose(-2, -1)


def _orthonormal_basis(torch: ModuleType, u: Any, count: int) -> Any:
    """`count` orthonormal columns [..., m, count] whose first ones are `u`'s [..., m, n]
    (its columns orthonormal, or zero where a singular value is zero; zero ones last, as the
    values are sorted): Q of u's QR, each of its first n columns signed as u's (R's diagonal
    is +-1 there), the rest completing the basis."""
    n = u.shape[-1]
    q, r = householder.qr(torch, u, count, n)
    signs = torch.where(torch.diagonal(r, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(u.dtype)
    return torch.cat([q[..., :n] * signs.unsqueeze(-2), q[..., n:]], -1)
