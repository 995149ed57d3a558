"""SVD and symmetric eigendecomposition of small matrices by Jacobi rotations, for the slim
targets (shimkit.aot.linalg writes the calls; this module has the steps).

`torch.linalg.svd`, `svdvals`, `eigh`, `eigvalsh` (and the older `torch.svd`) have no C
shim in any torch. Models call them on data: the Kabsch alignment of two point sets is the
SVD of a 3x3 covariance, a homography or fundamental matrix by the direct linear transform
the last singular vector of an 8 x 9 system, whitening the eigenvectors of a covariance.

- svd: one-sided (Hestenes) Jacobi: the columns of A rotated until orthogonal; the singular
  values are their norms, descending, U the normalised columns, V the accumulated rotations.
  A matrix of more columns than rows is transposed first, so the rotations act on the fewer
  columns. The columns are paired in the round-robin order of a tournament (Brent and Luk's
  parallel ordering): each step rotates n/2 disjoint pairs at once, as a few whole-tensor
  ops, and n - 1 steps meet every pair once (a sweep). Every step is the same ops (the
  pairing moves by one fixed shuffle), so the graph holds one step in a loop, run n - 1
  times a sweep, whatever n (unrolled, a 16-column SVD was 8 x 15 copies of it, which
  Inductor took minutes to compile). Jacobi converges quadratically: `_sweeps` gives one
  sweep more than random, graded and clustered float64 matrices needed to be orthogonal to
  rounding (4 sweeps for 4 columns, 6 for 10, 7 for 16, 8 for 24 and 32, 9 for 48 and 64). U
  is then made orthonormal and, for the full SVD, completed to a square basis by a
  Householder QR of it (`shimkit.aot.householder`): where a singular value is zero the
  rotated column is zero, and LAPACK's U has a unit vector there (a Kabsch alignment of
  coplanar points needs it). svdvals and pinv need no U (`singular_values`;
  shimkit.aot.linalg builds pinv from the rotated columns A V).
- eigh: the same rotations on the symmetric matrix the `UPLO` triangle gives, shifted by its
  Frobenius norm so that it is positive semi-definite: V is then its eigenvectors (an
  eigenvalue and its negative cannot mix), and each eigenvalue is the Rayleigh quotient
  v^T A v of the unshifted matrix. Measured on float32 covariances of condition 1e2 and 1e6,
  the smallest eigenvalue's relative error is 3-7x below LAPACK's for 3-8 columns, and for
  16 at 1e2; 2x above it for 16 columns at 1e6 (the shifted singular values instead lose
  rounding times the norm: up to 20x worse). Eigenvalues ascending, the eigenvectors as
  columns, as torch returns them.

Each rotation is a handful of reductions and elementwise ops, so Inductor generates the
kernels on either device. Singular vectors and eigenvectors are unique only up to sign (and
within a repeated value, up to rotation); LAPACK's choice is not specified, and these may
differ from it, as torch's documentation warns for its own backends. Products that do not
depend on the choice (U Vh, V diag(L) V^T, the reconstruction) agree with LAPACK's to
rounding.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot import householder, loop

# (up to this many columns, sweeps): one more than measured (see the module's doc).
_SWEEPS = ((4, 5), (10, 7), (16, 8), (32, 9), (64, 10))


def _sweeps(width: int) -> int:
    """Sweeps for `width` columns (at most the last of `_SWEEPS`)."""
    return next(sweeps for columns, sweeps in _SWEEPS if width <= columns)


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
    triangle = torch.tril(a) if lower else torch.triu(a)
    symmetric = (
        triangle
        + triangle.transpose(-2, -1)
        - torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1))
    )
    shift = symmetric.square().sum((-2, -1), keepdim=True).sqrt()  # >= every |eigenvalue|
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    _, _, v = rotated_columns(torch, symmetric + shift * eye)
    # v_i^T A v_i, A v as elementwise products and a sum (no matmul: no TF32 on a GPU).
    product = (symmetric.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
    values, order = torch.sort((v * product).sum(-2), dim=-1, stable=True)
    return values, v.gather(-1, order.unsqueeze(-2).expand(v.shape))


def svd(torch: ModuleType, a: Any, full_matrices: bool = False) -> tuple[Any, Any, Any]:
    """(U [..., m, m or k], S descending [..., k], Vh [..., k or n, n]) of `a` [..., m, n],
    k = min(m, n): the reduced SVD, or with `full_matrices` the full one (they are the same
    for a square `a`). A wide `a` is the transpose of its transpose's SVD, so the rotations
    always act on the fewer columns."""
    if a.shape[-2] < a.shape[-1]:
        u, values, vh = _tall_svd(torch, a.transpose(-2, -1), full_matrices)
        return vh.transpose(-2, -1), values, u.transpose(-2, -1)
    return _tall_svd(torch, a, full_matrices)


def singular_values(torch: ModuleType, a: Any) -> Any:
    """S descending [..., k] of `a` [..., m, n]: the norms of its rotated columns (its
    transpose's if wide), with no U to build."""
    if a.shape[-2] < a.shape[-1]:
        a = a.transpose(-2, -1)
    return torch.sort(rotated_columns(torch, a)[0], dim=-1, descending=True, stable=True)[0]


def _tall_svd(torch: ModuleType, a: Any, full_matrices: bool) -> tuple[Any, Any, Any]:
    """svd of `a` [..., m, n] with m >= n."""
    norms, columns, v = rotated_columns(torch, a)
    values, order = torch.sort(norms, dim=-1, descending=True, stable=True)
    columns = columns.gather(-1, order.unsqueeze(-2).expand(columns.shape))
    v = v.gather(-1, order.unsqueeze(-2).expand(v.shape))
    u = _orthonormal_basis(torch, columns, a.shape[-2] if full_matrices else a.shape[-1])
    return u, values, v.transpose(-2, -1)


def rotated_columns(torch: ModuleType, a: Any) -> tuple[Any, Any, Any]:
    """(column norms [..., n], columns [..., m, n], V [..., n, n]) after `_sweeps` sweeps of
    one-sided Jacobi on `a` [..., m, n]: A V has orthogonal columns, V orthogonal."""
    m, n = a.shape[-2], a.shape[-1]
    if n % 2:  # an odd count gets a zero column: its rotations are exact identities
        a = torch.cat([a, torch.zeros_like(a[..., :1])], -1)
    width = a.shape[-1]
    eye = torch.eye(width, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], width, width)
    # A stacked on the identity: rotating the columns of both at once accumulates V below A V.
    # Pair i is (top[i], bottom[i]), the two halves of the columns.
    stacked = torch.cat([a, eye], -2)
    top, bottom = stacked[..., : width // 2], stacked[..., width // 2 :]

    def step(top: Any, bottom: Any) -> tuple[Any, Any]:
        x_top, x_bottom = top[..., :m, :], bottom[..., :m, :]
        alpha = (x_top * x_top).sum(-2, keepdim=True)
        beta = (x_bottom * x_bottom).sum(-2, keepdim=True)
        gamma = (x_top * x_bottom).sum(-2, keepdim=True)
        c, s = _rotation(torch, gamma, alpha, beta)
        return _next_pairs(torch, c * top - s * bottom, s * top + c * bottom)

    top, bottom = loop.repeated(torch, step, _sweeps(width) * (width - 1), top, bottom)
    # After each sweep the columns are back in their places: drop the padding column.
    stacked = torch.cat([top, bottom], -1)
    columns, v = stacked[..., :m, :n], stacked[..., m : m + n, :n]
    return columns.norm(dim=-2), columns, v


def _next_pairs(torch: ModuleType, top: Any, bottom: Any) -> tuple[Any, Any]:
    """The round-robin's next pairing: the first column stays, the others move one place
    round the ring (top left to right, bottom right to left)."""
    if top.shape[-1] == 1:
        return top, bottom
    return (
        torch.cat([top[..., :1], bottom[..., :1], top[..., 1:-1]], -1),
        torch.cat([bottom[..., 1:], top[..., -1:]], -1),
    )


def _orthonormal_basis(torch: ModuleType, columns: Any, count: int) -> Any:
    """`count` orthonormal columns [..., m, count] whose first ones are `columns` [..., m, n]
    normalised (they are orthogonal, and zero where a singular value is zero; zero ones
    last, as the values are sorted): Q of their QR, each of its first n columns signed as
    the column (R's diagonal is +-its norm there), the rest completing the basis."""
    n = columns.shape[-1]
    q, r = householder.qr(torch, columns, count, n)
    signs = torch.where(torch.diagonal(r, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(columns.dtype)
    return torch.cat([q[..., :n] * signs.unsqueeze(-2), q[..., n:]], -1)
