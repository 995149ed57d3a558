"""Linear algebra on small matrices in its math form, for the slim targets.

`torch.linalg.inv`, `solve`, `det`, `slogdet`, `cholesky`, `solve_triangular`, `svd`,
`svdvals`, `eigh`, `eigvalsh`, `pinv`, `qr` (and the older `inverse`, `det`, `logdet`,
`cholesky_solve`, `svd`, `qr`) have no C shim torch's AOTInductor could call: a blob with
them calls libtorch's proxy executor, which no slim runtime has, so compile would refuse the
model. They appear in real models on data, not only on weights (a pose head aligning
keypoints, a Kalman or Gaussian-process step, camera intrinsics inverted per sample, a
rotation orthonormalised from a network's output); freezing folds the ones on weights
alone. For matrices of a static size, compile writes them as elementary steps (unrolled, or
one step in a loop where every step is alike) so Inductor generates the kernels on either
device:

- LU with partial pivoting (LAPACK's getrf: the first largest magnitude in the column is
  the pivot, rows swapped whole), giving det (the product of U's diagonal, negated per
  swap), slogdet, and solve and inv by forward and back substitution; square matrices of
  at most `SIZE_LIMIT` rows;
- Cholesky (column by column) for `cholesky` and `cholesky_solve`, the same sizes;
- substitution alone for `solve_triangular` (a left-hand side only);
- Householder reflections for QR, any mode, of matrices of at most `LOOP_SIZE_LIMIT` rows
  and columns (`shimkit.aot.householder`: LAPACK's reflections, so torch's Q and R, signs
  too; a loop of one reflection);
- Jacobi rotations for SVD and eigh (`shimkit.aot.jacobi`): eigh of square matrices, the
  SVD (reduced or full) of any shape, and `pinv` from them as torch computes it (its
  tolerances too), for matrices of at most `LOOP_SIZE_LIMIT` rows and columns (a loop of
  one rotation step).

What differs from torch: a singular matrix (or one that is not positive definite for
Cholesky) gives inf or NaN where torch raises, since a blob cannot raise; singular vectors
and eigenvectors may differ from LAPACK's by sign (both are valid); the results agree with
LAPACK's to rounding (tests/aot/test_linalg_math_form.py). Batched matrices and dynamic
batch sizes are fine; the matrix sizes must be static. `lstsq` cannot be exported at all
(torch.export: its outputs' sizes depend on the data).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot import householder, jacobi
from shimkit.aot.decompose import argument, input_shape, rewrite_calls

# The largest matrix side written out: the LU, Cholesky and substitution steps are unrolled,
# so their graphs grow with the cube of it.
SIZE_LIMIT = 16
# The largest side for the forms that are one step in a loop (QR, SVD, eigh, pinv): their
# graphs do not grow with it, their run time does (about n^3 per sweep, `jacobi._sweeps`
# measured up to it).
LOOP_SIZE_LIMIT = 64
QR_MODES = ("reduced", "complete", "r")


def _fits(matrix: Any, square: bool = True, limit: int = SIZE_LIMIT) -> bool:
    """Whether a form takes `matrix`: float32 or float64 (LAPACK's real types), square (unless
    not `square`), its rows and columns static and at most `limit` (any batch dims)."""
    if not (matrix.dtype.is_floating_point and matrix.dtype.itemsize >= 4) or matrix.dim() < 2:
        return False
    rows, cols = matrix.shape[-2], matrix.shape[-1]
    if not (type(rows) is int and type(cols) is int and min(rows, cols) >= 1):
        return False
    return max(rows, cols) <= limit and (rows == cols or not square)


def _argument_fits(node: Any, fits: Any = _fits, index: int = 0) -> bool:
    """`fits` of a call's tensor argument `index` as traced (False when it has none): the
    check of a call node."""
    value = node.args[index].meta.get("val") if index < len(node.args) else None
    return value is not None and bool(fits(value))


def _pseudo_inverse(torch: ModuleType, a: Any, atol: Any, rtol: Any, hermitian: bool) -> Any:
    """linalg.pinv as torch computes it: from the SVD's rotations (the eigendecomposition if
    `hermitian`), the reciprocal of each singular value above max(atol, rtol * the largest),
    0 for the rest; rtol by default eps * max(m, n), or 0 where atol is given and positive.
    `atol` and `rtol` are None, numbers or tensors (one per matrix)."""
    default_rtol = torch.finfo(a.dtype).eps * max(a.shape[-2], a.shape[-1])
    if rtol is None and atol is not None:
        rtol = (
            torch.where(atol > 0, 0.0, default_rtol)
            if hasattr(atol, "dim")
            else (0.0 if atol > 0 else default_rtol)
        )
    elif rtol is None:
        rtol = default_rtol

    def tolerance(largest: Any) -> Any:  # largest: [..., 1]
        relative = rtol * largest if not hasattr(rtol, "dim") else rtol.unsqueeze(-1) * largest
        if atol is None:
            return relative
        if not hasattr(atol, "dim"):
            return relative.clamp(min=atol)
        return torch.maximum(atol.unsqueeze(-1), relative)

    if hermitian:
        values, vectors = jacobi.eigh(torch, a, lower=True)
        magnitudes = values.abs()
        kept = magnitudes > tolerance(magnitudes.amax(-1, keepdim=True))
        inverted = torch.where(kept, values.reciprocal(), 0.0)
        return torch.matmul(vectors * inverted.unsqueeze(-2), vectors.transpose(-2, -1))
    if a.shape[-2] < a.shape[-1]:  # pinv(A) = pinv(A^T)^T: the rotations act on fewer columns
        return _pseudo_inverse(torch, a.transpose(-2, -1), atol, rtol, False).transpose(-2, -1)
    # V diag(1/s) U^T with U = A V diag(1/s): V diag(1/s^2) (A V)^T, from the rotated
    # columns A V as they are (no orthonormal U to build: its QR is most of an SVD's steps).
    values, columns, v = jacobi.rotated_columns(torch, a)
    kept = values > tolerance(values.amax(-1, keepdim=True))
    inverted = torch.where(kept, values.square().reciprocal(), 0.0)
    return torch.matmul(v * inverted.unsqueeze(-2), columns.transpose(-2, -1))


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
        if not _fits(a, False, LOOP_SIZE_LIMIT):
            return NotImplemented
        return jacobi.svd(torch, a, full_matrices)

    def svdvals(a: Any, driver: Any = None) -> Any:
        if not _fits(a, False, LOOP_SIZE_LIMIT):
            return NotImplemented
        return jacobi.singular_values(torch, a)

    def old_svd(a: Any, some: bool = True, compute_uv: bool = True) -> Any:
        if not (_fits(a, False, LOOP_SIZE_LIMIT) and compute_uv):
            return NotImplemented
        u, values, vh = jacobi.svd(torch, a, full_matrices=not some)
        return u, values, vh.transpose(-2, -1)  # torch.svd returns V

    def pinv(a: Any, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Any:
        if not _fits(a, hermitian, LOOP_SIZE_LIMIT):
            return NotImplemented
        return _pseudo_inverse(torch, a, atol, rtol, hermitian)

    def qr(a: Any, mode: str = "reduced") -> Any:
        if not _fits(a, False, LOOP_SIZE_LIMIT) or mode not in QR_MODES:
            return NotImplemented
        m, n = a.shape[-2], a.shape[-1]
        complete = mode == "complete"
        q_columns = None if mode == "r" else m if complete else min(m, n)
        return householder.qr(torch, a, q_columns, m if complete else min(m, n))

    def old_qr(a: Any, some: bool = True) -> Any:
        return qr(a, "reduced" if some else "complete")

    def eigh(a: Any, UPLO: str = "L") -> Any:  # torch's argument names: given by keyword
        if not _fits(a, True, LOOP_SIZE_LIMIT):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")

    def eigvalsh(a: Any, UPLO: str = "L") -> Any:
        if not _fits(a, True, LOOP_SIZE_LIMIT):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")[0]

    def square(node: Any) -> bool:
        return _argument_fits(node)

    def looped_square(node: Any) -> bool:
        return _argument_fits(node, lambda a: _fits(a, True, LOOP_SIZE_LIMIT))

    def looped_any_shape(node: Any) -> bool:
        return _argument_fits(node, lambda a: _fits(a, False, LOOP_SIZE_LIMIT))

    def old_svd_call(node: Any) -> bool:
        return looped_any_shape(node) and bool(argument(node, 2, "compute_uv", True))

    def pinv_call(node: Any) -> bool:
        hermitian = argument(node, 3, "hermitian", False)
        return looped_square(node) if hermitian else looped_any_shape(node)

    def qr_call(node: Any) -> bool:
        return looped_any_shape(node) and argument(node, 1, "mode", "reduced") in QR_MODES

    def solve_call(node: Any) -> bool:
        rhs = input_shape(node, 1)
        return square(node) and bool(argument(node, 2, "left", True)) and rhs is not None

    def cholesky_solve_call(node: Any) -> bool:
        rhs = input_shape(node)
        return _argument_fits(node, index=1) and len(rhs or ()) >= 2

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
        aten.linalg_svd.default: (svd, looped_any_shape),
        aten.linalg_svdvals.default: (svdvals, looped_any_shape),
        aten.svd.default: (old_svd, old_svd_call),
        aten.linalg_pinv.atol_rtol_tensor: (pinv, pinv_call),
        aten.linalg_pinv.atol_rtol_float: (pinv, pinv_call),
        aten.linalg_qr.default: (qr, qr_call),
        aten.qr.default: (old_qr, looped_any_shape),
        aten.linalg_eigh.default: (eigh, looped_square),
        aten.linalg_eigvalsh.default: (eigvalsh, looped_square),
    }


def linalg_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every call the module's docstring lists, on matrices within its
    size limits, in its math form, how many calls were rewritten)."""
    return rewrite_calls(exported, _forms(torch))
