"""Linear algebra on small matrices in its math form, for the slim targets.

`torch.linalg.inv`, `solve`, `det`, `slogdet`, `cholesky`, `solve_triangular`, `svd`,
`svdvals`, `eigh`, `eigvalsh`, `pinv`, `qr` (and the older `inverse`, `det`, `logdet`,
`cholesky_solve`, `svd`, `qr`) have no C shim torch's AOTInductor could call: a blob with
them calls libtorch's proxy executor, which no slim runtime has, so compile would refuse the
model. They appear in real models on data, not only on weights (a pose head aligning
keypoints, a Kalman or Gaussian-process step, camera intrinsics inverted per sample, a
rotation orthonormalised from a network's output); freezing folds the ones on weights
alone. For matrices of a static size of at most `SIZE_LIMIT` rows and columns, compile
writes them as elementary steps, each kind one step in a loop (`shimkit.aot.loop`: the step's
row and column given by masks moved one place a step, so every step is the same ops), so
Inductor generates the kernels once, on either device:

- LU with partial pivoting (LAPACK's getrf: the first largest magnitude in the column is
  the pivot, rows swapped whole), giving det (the product of U's diagonal, negated per
  swap), slogdet, and solve and inv by forward and back substitution (a row a step);
- Cholesky (a column a step) for `cholesky` and `cholesky_solve`;
- substitution alone for `solve_triangular` (a left-hand side only);
- Householder reflections for QR, any mode (`shimkit.aot.householder`: LAPACK's
  reflections, so torch's Q and R, signs too);
- Jacobi rotations for SVD and eigh (`shimkit.aot.jacobi`): eigh of square matrices, the
  SVD (reduced or full) of any shape, and `pinv` from them as torch computes it (its
  tolerances too).

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

from shimkit.aot import householder, jacobi, loop
from shimkit.aot.decompose import argument, input_shape, rewrite_calls

# The largest matrix side taken. Every form is one step in a loop (`shimkit.aot.loop`), so
# the graph does not grow with it; the run time does (about n^3 a sweep for the Jacobi
# rotations, whose sweep counts `jacobi._sweeps` measured up to it).
SIZE_LIMIT = 64
QR_MODES = ("reduced", "complete", "r")


def _fits(matrix: Any, square: bool = True) -> bool:
    """Whether a form takes `matrix`: float32 or float64 (LAPACK's real types), square (unless
    not `square`), its rows and columns static and at most `SIZE_LIMIT` (any batch dims)."""
    if not (matrix.dtype.is_floating_point and matrix.dtype.itemsize >= 4) or matrix.dim() < 2:
        return False
    rows, cols = matrix.shape[-2], matrix.shape[-1]
    if not (type(rows) is int and type(cols) is int and min(rows, cols) >= 1):
        return False
    return max(rows, cols) <= SIZE_LIMIT and (rows == cols or not square)


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
    """(LU [..., n, n]: U on and above the diagonal, L's factors below it, as getrf packs them;
    the row order as indices [..., n]; the sign of that permutation [...]). One elimination
    step in a loop, its row and column given by masks moved one place a step."""
    n = a.shape[-1]
    positions = torch.arange(n, device=a.device)

    def eliminate(lu: Any, order: Any, sign: Any, at_k: Any, after_k: Any) -> tuple[Any, ...]:
        column = loop.picked(torch, lu, at_k)  # column k, every row
        # The first largest magnitude at or below row k, as LAPACK's idamax.
        pivot = torch.where(after_k | at_k, column.abs(), -1.0).argmax(-1)
        # Made here: a loop's step may not close over the graph's tensors (`positions`).
        is_pivot = torch.arange(n, device=lu.device) == pivot.unsqueeze(-1)
        pivot_row = lu.gather(-2, pivot[..., None, None].expand(*lu.shape[:-2], 1, n))
        row_k = loop.picked(torch, lu, at_k, rows=True, keepdim=True)
        # Rows k and pivot swapped whole, in every batch.
        lu = torch.where(
            at_k.unsqueeze(-1), pivot_row, torch.where(is_pivot.unsqueeze(-1), row_k, lu)
        )
        order_k = loop.picked(torch, order, at_k, keepdim=True)
        order = torch.where(
            at_k, order.gather(-1, pivot.unsqueeze(-1)), torch.where(is_pivot, order_k, order)
        )
        sign = torch.where((is_pivot & at_k).any(-1), sign, -sign)
        column = loop.picked(torch, lu, at_k)
        factor = (column / loop.picked(torch, column, at_k, keepdim=True)).unsqueeze(-1)
        below = after_k.unsqueeze(-1)
        lu = torch.where(
            below & after_k,
            lu - factor * pivot_row,
            torch.where(below & at_k, factor, lu),
        )
        return lu, order, sign, *(loop.shifted(torch, mask) for mask in (at_k, after_k))

    order = positions.expand(a.shape[:-1])
    sign = torch.ones(a.shape[:-2], dtype=a.dtype, device=a.device)
    lu, order, sign, *_ = loop.repeated(
        torch, eliminate, n, a, order, sign, positions == 0, positions > 0
    )
    return lu, order, sign


def _substitute(torch: ModuleType, t: Any, b: Any, upper: bool, unit: bool) -> Any:
    """X with T X = B for the triangle of `t` [..., n, n] (its other entries unread; with
    `unit` its diagonal too, taken as ones); B [..., n, k]. One row solved a step, in a loop."""
    n = t.shape[-1]
    positions = torch.arange(n, device=t.device)

    def solve_row(x: Any, at_i: Any, solved: Any, t: Any, b: Any) -> tuple[Any, Any, Any]:
        row = loop.picked(torch, t, at_i, rows=True)  # row i of T
        known = torch.where(solved, row, 0.0).unsqueeze(-1)  # its entries of solved rows
        value = loop.picked(torch, b, at_i, rows=True) - (known * x).sum(-2)
        if not unit:
            value = value / loop.picked(torch, row, at_i, keepdim=True)
        x = torch.where(at_i.unsqueeze(-1), value.unsqueeze(-2), x)
        return x, loop.shifted(torch, at_i, forward=not upper), solved | at_i

    first = positions == (n - 1 if upper else 0)
    return loop.repeated(
        torch, solve_row, n, torch.zeros_like(b), first, positions < 0, reads=(t, b)
    )[0]


def _lu_solve(torch: ModuleType, a: Any, b: Any) -> Any:
    lu, order, _ = _lu(torch, a)
    permuted = b.gather(-2, order.unsqueeze(-1).expand(b.shape))
    y = _substitute(torch, lu, permuted, upper=False, unit=True)
    return _substitute(torch, lu, y, upper=True, unit=False)


def _cholesky(torch: ModuleType, a: Any) -> Any:
    """L [..., n, n] (zeros above the diagonal) with L L^T = A, from A's lower triangle: one
    column a step, in a loop."""
    n = a.shape[-1]
    positions = torch.arange(n, device=a.device)

    def next_column(lower: Any, at_j: Any, after_j: Any, a: Any) -> tuple[Any, Any, Any]:
        # A's column j less L[:, :j] L[j, :j] (L's columns from j on are still zero).
        row_j = loop.picked(torch, lower, at_j, rows=True, keepdim=True)
        rest = loop.picked(torch, a, at_j) - (lower * row_j).sum(-1)
        root = loop.picked(torch, rest, at_j, keepdim=True).sqrt()
        column = torch.where(at_j, root, torch.where(after_j, rest / root, 0.0))
        lower = torch.where(at_j, column.unsqueeze(-1), lower)
        return lower, loop.shifted(torch, at_j), loop.shifted(torch, after_j)

    return loop.repeated(
        torch, next_column, n, torch.zeros_like(a), positions == 0, positions > 0, reads=(a,)
    )[0]


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
        lu, _, sign = _lu(torch, a)
        return sign * torch.diagonal(lu, dim1=-2, dim2=-1).prod(-1)

    def slogdet(a: Any) -> tuple[Any, Any]:
        if not _fits(a):
            return NotImplemented
        lu, _, sign = _lu(torch, a)
        diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
        return sign * diagonal.sign().prod(-1), diagonal.abs().log().sum(-1)

    def logdet(a: Any) -> Any:
        if not _fits(a):
            return NotImplemented
        sign, log_abs = slogdet(a)
        return torch.where(sign < 0, float("nan"), log_abs)  # torch's: NaN for det < 0

    def cholesky(a: Any, upper: bool = False) -> Any:
        if not _fits(a):
            return NotImplemented
        lower = _cholesky(torch, a)
        return lower.transpose(-2, -1) if upper else lower

    def cholesky_solve(b: Any, factor: Any, upper: bool = False) -> Any:
        if not (_fits(factor) and b.dim() >= 2):
            return NotImplemented
        lower = factor.transpose(-2, -1) if upper else factor
        lower, b = _broadcast(torch, lower, b)
        y = _substitute(torch, lower, b, upper=False, unit=False)
        return _substitute(torch, lower.transpose(-2, -1), y, upper=True, unit=False)

    def solve_triangular(
        a: Any, b: Any, upper: bool, left: bool = True, unitriangular: bool = False
    ) -> Any:
        if not (_fits(a) and left):
            return NotImplemented
        a, b = _broadcast(torch, a, b)
        return _substitute(torch, a, b, upper, unitriangular)

    def svd(a: Any, full_matrices: bool = True, driver: Any = None) -> Any:
        if not _fits(a, square=False):
            return NotImplemented
        return jacobi.svd(torch, a, full_matrices)

    def svdvals(a: Any, driver: Any = None) -> Any:
        if not _fits(a, square=False):
            return NotImplemented
        return jacobi.singular_values(torch, a)

    def old_svd(a: Any, some: bool = True, compute_uv: bool = True) -> Any:
        if not (_fits(a, square=False) and compute_uv):
            return NotImplemented
        u, values, vh = jacobi.svd(torch, a, full_matrices=not some)
        return u, values, vh.transpose(-2, -1)  # torch.svd returns V

    def pinv(a: Any, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Any:
        if not _fits(a, square=hermitian):
            return NotImplemented
        return _pseudo_inverse(torch, a, atol, rtol, hermitian)

    def qr(a: Any, mode: str = "reduced") -> Any:
        if not _fits(a, square=False) or mode not in QR_MODES:
            return NotImplemented
        m, n = a.shape[-2], a.shape[-1]
        complete = mode == "complete"
        q_columns = None if mode == "r" else m if complete else min(m, n)
        return householder.qr(torch, a, q_columns, m if complete else min(m, n))

    def old_qr(a: Any, some: bool = True) -> Any:
        return qr(a, "reduced" if some else "complete")

    def eigh(a: Any, UPLO: str = "L") -> Any:  # torch's argument names: given by keyword
        if not _fits(a):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")

    def eigvalsh(a: Any, UPLO: str = "L") -> Any:
        if not _fits(a):
            return NotImplemented
        return jacobi.eigh(torch, a, lower=UPLO.upper() == "L")[0]

    def square(node: Any) -> bool:
        return _argument_fits(node)

    def any_shape(node: Any) -> bool:
        return _argument_fits(node, lambda a: _fits(a, square=False))

    def old_svd_call(node: Any) -> bool:
        return any_shape(node) and bool(argument(node, 2, "compute_uv", True))

    def pinv_call(node: Any) -> bool:
        hermitian = argument(node, 3, "hermitian", False)
        return square(node) if hermitian else any_shape(node)

    def qr_call(node: Any) -> bool:
        return any_shape(node) and argument(node, 1, "mode", "reduced") in QR_MODES

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
        aten.linalg_svd.default: (svd, any_shape),
        aten.linalg_svdvals.default: (svdvals, any_shape),
        aten.svd.default: (old_svd, old_svd_call),
        aten.linalg_pinv.atol_rtol_tensor: (pinv, pinv_call),
        aten.linalg_pinv.atol_rtol_float: (pinv, pinv_call),
        aten.linalg_qr.default: (qr, qr_call),
        aten.qr.default: (old_qr, any_shape),
        aten.linalg_eigh.default: (eigh, square),
        aten.linalg_eigvalsh.default: (eigvalsh, square),
    }


def linalg_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every call the module's docstring lists, on matrices within its
    size limits, in its math form, how many calls were rewritten)."""
    return rewrite_calls(exported, _forms(torch))
