"""Linear algebra on small matrices in its math form, for the slim targets.

`torch.linalg.inv`, `solve`, `det`, `slogdet`, `cholesky`, `solve_triangular`, `svd`,
`svdvals`, `eigh`, `eigvalsh` (and the older `inverse`, `det`, `logdet`, `cholesky_solve`,
`svd`) have no C shim torch's AOTInductor could call: a blob with them calls libtorch's
proxy executor, which no slim runtime has, so compile would refuse the model. They appear
in real models on data, not only on weights (a pose head aligning keypoints, a Kalman or
Gaussian-process step, camera intrinsics inverted per sample); freezing folds the ones on
weights alone. For matrices of a static size of at most `SIZE_LIMIT` (`JACOBI_SIZE_LIMIT`
for SVD and eigh), compile writes them as elementary steps, unrolled over rows so Inductor
generates the kernels on either device:

- LU with partial pivoting (LAPACK's getrf: the first largest magnitude in the column is
  the pivot, rows swapped whole), giving det (the product of U's diagonal, negated per
  swap), slogdet, and solve and inv by forward and back substitution;
- Cholesky (column by column) for `cholesky` and `cholesky_solve`;
- substitution alone for `solve_triangular` (a left-hand side only);
- Jacobi rotations for SVD and eigh (`shimkit.aot.jacobi`).

What differs from torch: a singular matrix (or one that is not positive definite for
Cholesky) gives inf or NaN where torch raises, since a blob cannot raise; singular vectors
and eigenvectors may differ from LAPACK's by sign (both are valid); the results agree with
LAPACK's to rounding (tests/aot/test_linalg_math_form.py). Batched matrices and dynamic
batch sizes are fine; the matrix sizes must be static. QR, pinv, lstsq and non-square SVDs
keep their calls, and compile names them.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot import jacobi
from shimkit.aot.decompose import argument, input_shape, rewrite_calls

# The largest matrix side written out: the steps are unrolled, so the graph grows with the
# cube of it.
SIZE_LIMIT = 16


def _fits(matrix: Any, limit: int = SIZE_LIMIT) -> bool:
    """Whether a form takes `matrix`: float32 or float64 (LAPACK's real types), square, of a
    static size within `limit` (any batch dims)."""
    if not (matrix.dtype.is_floating_point and matrix.dtype.itemsize >= 4) or matrix.dim() < 2:
        return False
    rows, cols = matrix.shape[-2], matrix.shape[-1]
    return type(rows) is int and rows == cols and 1 <= rows <= limit


def _argument_fits(node: Any, index: int = 0, limit: int = SIZE_LIMIT) -> bool:
    """`_fits` for a call's tensor argument `index`, as traced: the check of a call node."""
    value = node.args[index].meta.get("val") if index < len(node.args) else None
    return value is not None and _fits(value, limit)


def _lu(torch: ModuleType, a: Any) -> tuple[Any, Any, Any]:
    """(rows of U as a list, each [..., n], with L's factors below the diagonal as getrf
    packs them; the row order as indices [..., n]; the sign of that permutation [...])."""
    n = a.shape[-1]
    rows = [a[..., i, :] for i in range(n)]
    order = torch.arange(n, device=a.device).expand(a.shape[:-1])
    sign = torch.ones(a.shape[:-2], dtype=a.dtype, device=a.device)
    for k in range(n):
        if k < n - 1:
            column = torch.stack([rows[i][..., k] for i in range(k, n)], -1).abs()
            pivot = column.argmax(-1) + k  # the first largest, as LAPACK's idamax
            # Swap row k with the pivot's row in every batch: a select per row.
            top = rows[k]
            for i in range(k + 1, n):
                here = (pivot == i).unsqueeze(-1)
                rows[k] = torch.where(here, rows[i], rows[k])
                rows[i] = torch.where(here, top, rows[i])
            positions = torch.arange(n, device=a.device)
            swapped = torch.where(
                positions == k,
                pivot.unsqueeze(-1),
                torch.where(positions == pivot.unsqueeze(-1), k, positions),
            )
            order = order.gather(-1, swapped)
            sign = torch.where(pivot != k, -sign, sign)
        head = rows[k][..., k : k + 1]
        for i in range(k + 1, n):
            factor = rows[i][..., k : k + 1] / head
            rest = rows[i][..., k + 1 :] - factor * rows[k][..., k + 1 :]
            rows[i] = torch.cat([rows[i][..., :k], factor, rest], -1)
    return rows, order, sign


def _diagonal(torch: ModuleType, rows: list[Any]) -> Any:
    return torch.stack([row[..., i] for i, row in enumerate(rows)], -1)


def _substitute(torch: ModuleType, rows: list[Any], b: Any, upper: bool, unit: bool) -> Any:
    """X with T X = B for the triangle of `rows` (T's rows, [..., n] each); B [..., n, k]."""
    n = len(rows)
    solved: dict[int, Any] = {}
    for i in reversed(range(n)) if upper else range(n):
        value = b[..., i, :]
        for j in solved:
            value = value - rows[i][..., j : j + 1] * solved[j]
        solved[i] = value if unit else value / rows[i][..., i : i + 1]
    return torch.stack([solved[i] for i in range(n)], -2)


def _lu_solve(torch: ModuleType, a: Any, b: Any) -> Any:
    rows, order, _ = _lu(torch, a)
    permuted = b.gather(-2, order.unsqueeze(-1).expand(b.shape))
    y = _substitute(torch, rows, permuted, upper=False, unit=True)
    return _substitute(torch, rows, y, upper=True, unit=False)


def _cholesky_rows(torch: ModuleType, a: Any) -> list[Any]:
    """The rows of L ([..., n] each, zeros above the diagonal) with L L^T = A."""
    n = a.shape[-1]
    columns: list[Any] = []  # column j of L below and on the diagonal, [..., n - j]
    for j in range(n):
        rest = a[..., j:, j]
        for p in range(j):
            # L[j:, p] * L[j, p] (column p holds rows p..n-1).
            below = columns[p][..., j - p :]
            rest = rest - below * columns[p][..., j - p : j - p + 1]
        root = rest[..., :1].sqrt()
        columns.append(torch.cat([root, rest[..., 1:] / root], -1))
    zero = torch.zeros((*a.shape[:-2], 1), dtype=a.dtype, device=a.device)
    rows = []
    for i in range(n):
        entries = [columns[j][..., i - j : i - j + 1] for j in range(i + 1)]
        rows.append(torch.cat(entries + [zero] * (n - i - 1), -1))
    return rows


def _broadcast(torch: ModuleType, a: Any, b: Any) -> tuple[Any, Any]:
    """`a` and `b` expanded to their common batch dims (each keeps its last two)."""
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])


def _forms(torch: ModuleType) -> dict[Any, Any]:
    aten = torch.ops.aten

    def inv(a: Any) -> Any:
        if not _fits(a):
            return NotImplemented
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(a.shape)
        return _lu_solve(torch, a, eye)

    def solve(a: Any, b: Any, left: bool = True) -> Any:
        if not (_fits(a) and left):
            return NotImplemented
        vector = b.dim() == 1 or (b.dim() == a.dim() - 1 and b.shape == a.shape[:-1])
        rhs = b.unsqueeze(-1) if vector else b
        a, rhs = _broadcast(torch, a, rhs)
        x = _lu_solve(torch, a, rhs)
        return x.squeeze(-1) if vector else x

    def det(a: Any) -> Any:
        if not _fits(a):
            return NotImplemented
        rows, _, sign = _lu(torch, a)
        return sign * _diagonal(torch, rows).prod(-1)

    def slogdet(a: Any) -> tuple[Any, Any]:
        if not _fits(a):
            return NotImplemented
        rows, _, sign = _lu(torch, a)
        diagonal = _diagonal(torch, rows)
        return sign * diagonal.sign().prod(-1), diagonal.abs().log().sum(-1)

    def logdet(a: Any) -> Any:
        if not _fits(a):
            return NotImplemented
        sign, log_abs = slogdet(a)
        return torch.where(sign < 0, float("nan"), log_abs)  # torch's: NaN for det < 0

    def cholesky(a: Any, upper: bool = False) -> Any:
        if not _fits(a):
            return NotImplemented
        lower = torch.stack(_cholesky_rows(torch, a), -2)
        return lower.transpose(-2, -1) if upper else lower

    def cholesky_solve(b: Any, factor: Any, upper: bool = False) -> Any:
        if not (_fits(factor) and b.dim() >= 2):
            return NotImplemented
        lower = factor.transpose(-2, -1) if upper else factor
        lower, b = _broadcast(torch, lower, b)
        n = lower.shape[-1]
        rows = [lower[..., i, :] for i in range(n)]
        y = _substitute(torch, rows, b, upper=False, unit=False)
        transposed = lower.transpose(-2, -1)
        return _substitute(torch, [transposed[..., i, :] for i in range(n)], y, True, False)

    def solve_triangular(
        a: Any, b: Any, upper: bool, left: bool = True, unitriangular: bool = False
    ) -> Any:
        if not (_fits(a) and left):
            return NotImplemented
        a, b = _broadcast(torch, a, b)
        rows = [a[..., i, :] for i in range(a.shape[-1])]
        return _substitute(torch, rows, b, upper, unitriangular)

    def svd(a: Any, full_matrices: bool = True, driver: Any = None) -> Any:
        if not _fits(a, jacobi.JACOBI_SIZE_LIMIT):
            return NotImplemented
        return jacobi.svd(torch, a)  # square: full or not, the same shapes

    def svdvals(a: Any, driver: Any = None) -> Any:
        if not _fits(a, jacobi.JACOBI_SIZE_LIMIT):
            return NotImplemented
        return jacobi.svd(torch, a)[1]

    def old_svd(a: Any, some: bool = True, compute_uv: bool = True) -> Any:
        if not (_fits(a, jacobi.JACOBI_SIZE_LIMIT) and compute_uv):
            return NotImplemented
        u, values, vh = jacobi.svd(torch, a)
        return u, values, vh.transpose(-2, -1)  # torch.svd returns V

    def eigh(a: Any, UPLO: str = "L") -> Any:  # torch's argument names: given by keyword
        if not _fits(a, jacobi.JACOBI_SIZE_LIMIT):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")

    def eigvalsh(a: Any, UPLO: str = "L") -> Any:
        if not _fits(a, jacobi.JACOBI_SIZE_LIMIT):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")[0]

    def square(node: Any) -> bool:
        return _argument_fits(node)

    def small(node: Any) -> bool:
        return _argument_fits(node, limit=jacobi.JACOBI_SIZE_LIMIT)

    def old_svd_call(node: Any) -> bool:
        return small(node) and bool(argument(node, 2, "compute_uv", True))

    def solve_call(node: Any) -> bool:
        rhs = input_shape(node, 1)
        return square(node) and bool(argument(node, 2, "left", True)) and rhs is not None

    def cholesky_solve_call(node: Any) -> bool:
        rhs = input_shape(node)
        return _argument_fits(node, 1) and len(rhs or ()) >= 2

    def triangular_call(node: Any) -> bool:
        return square(node) and bool(argument(node, 3, "left", True))

    return {
        aten.linalg_inv.default: (inv, square),
        aten.inverse.default: (inv, square),
        aten.linalg_solve.default: (solve, solve_call),
        aten.linalg_det.default: (det, square),
        aten.det.default: (det, square),
        aten.linalg_slogdet.default: (slogdet, square),
        aten.logdet.default: (logdet, square),
        aten.linalg_cholesky.default: (cholesky, square),
        aten.cholesky_solve.default: (cholesky_solve, cholesky_solve_call),
        aten.linalg_solve_triangular.default: (solve_triangular, triangular_call),
        aten.linalg_svd.default: (svd, small),
        aten.linalg_svdvals.default: (svdvals, small),
        aten.svd.default: (old_svd, old_svd_call),
        aten.linalg_eigh.default: (eigh, small),
        aten.linalg_eigvalsh.default: (eigvalsh, small),
    }


def linalg_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every inv, solve, det, slogdet, logdet, cholesky, cholesky_solve and
    solve_triangular call on static square matrices of at most SIZE_LIMIT rows, and every
    svd, svdvals, eigh and eigvalsh call on ones of at most JACOBI_SIZE_LIMIT rows, in its
    math form, how many calls were rewritten)."""
    return rewrite_calls(exported, _forms(torch))
