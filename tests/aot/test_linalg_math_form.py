"""Linear algebra on small matrices in its math form (shimkit.aot.linalg, .jacobi,
.householder): inv, solve, det, slogdet, logdet, cholesky, cholesky_solve and
solve_triangular against torch's LAPACK results, in float64 and float32, sizes 1 to 16,
batched and with a dynamic batch; matrices that need row swaps; SVD and eigh (sizes 1 to 64)
on what does not depend on the vectors' signs, also of non-square matrices; pinv; QR with
LAPACK's signs (up to 64); the rotations and reflections as one step in a loop; what is left
alone; and pose-style models (a Kabsch alignment among them) compiled for the slim CPU
runtime (control: with a QR above the size limit, which has no form, compile refuses the
model and names the op)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shimkit.aot import jacobi, loop
from shimkit.aot.linalg import SIZE_LIMIT, linalg_in_math_form

from tests.aot.math_form_run import calls_of, compile_in_math_form_and_run

torch = pytest.importorskip("torch")

LINALG_OPS = (
    "aten.linalg_inv.default",
    "aten.inverse.default",
    "aten.linalg_solve.default",
    "aten.linalg_det.default",
    "aten.det.default",
    "aten.linalg_slogdet.default",
    "aten.logdet.default",
    "aten.linalg_cholesky.default",
    "aten.cholesky_solve.default",
    "aten.linalg_solve_triangular.default",
    "aten.linalg_svd.default",
    "aten.linalg_svdvals.default",
    "aten.svd.default",
    "aten.linalg_eigh.default",
    "aten.linalg_eigvalsh.default",
    "aten.linalg_pinv.atol_rtol_tensor",
    "aten.linalg_pinv.atol_rtol_float",
    "aten.linalg_qr.default",
    "aten.qr.default",
)


class Everything(torch.nn.Module):
    def forward(self, a: Any, b: Any, v: Any) -> tuple[Any, ...]:
        n = a.shape[-1]
        eye = torch.eye(n, dtype=a.dtype)
        spd = a @ a.mT + eye
        lower = torch.linalg.cholesky(spd)
        sign, log_abs = torch.linalg.slogdet(a)
        return (
            torch.linalg.inv(a),
            torch.inverse(a),
            torch.linalg.solve(a, b),
            torch.linalg.solve(a, v),  # a batch of vectors
            torch.linalg.det(a),
            torch.det(a),
            sign,
            log_abs,
            torch.logdet(spd),
            lower,
            torch.linalg.cholesky(spd, upper=True),
            torch.cholesky_solve(b, lower),
            torch.cholesky_solve(b, lower.mT, upper=True),
            torch.linalg.solve_triangular(torch.triu(a) + 3 * eye, b, upper=True),
            torch.linalg.solve_triangular(torch.tril(a) + 3 * eye, b, upper=False),
            torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
        )


def _inputs(n: int, dtype: Any, batch: int = 4, seed: int = 0) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, n, n, generator=g, dtype=dtype) + 2 * torch.eye(n, dtype=dtype)
    b = torch.randn(batch, n, 3, generator=g, dtype=dtype)
    return a, b, torch.randn(batch, n, generator=g, dtype=dtype)


def _compare(want: tuple[Any, ...], got: tuple[Any, ...], rtol: float) -> None:
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        assert w.shape == g.shape, (i, w.shape, g.shape)
        if w.numel() == 0:  # QR's mode "r": no Q
            continue
        scale = max(float(w.abs().max()), 1.0)  # log|det| of 0 is LAPACK's -4e-16 here
        err = float((w - g).abs().max()) / scale
        assert err <= rtol, (i, err)


# Sizes written out (up to loop.WRITTEN_OUT) and looped, up to the limit, in float64;
# float32's rounding up to 16.
@pytest.mark.parametrize(
    ("n", "dtype", "rtol"),
    [(n, torch.float64, 1e-12) for n in (1, 2, 3, 5, 8, 16, 33, SIZE_LIMIT)]
    + [(n, torch.float32, 2e-5) for n in (1, 2, 3, 5, 8, 16)],
)
def test_every_op_matches_lapack(n: int, dtype: Any, rtol: float) -> None:
    inputs = _inputs(n, dtype)
    exported = torch.export.export(Everything(), inputs)
    assert len(calls_of(exported, LINALG_OPS)) == 15  # control: the calls are there
    program, count = linalg_in_math_form(torch, exported)
    assert count == 15 and calls_of(program, LINALG_OPS) == []
    _compare(Everything()(*inputs), program.module()(*inputs), rtol)


def test_rows_are_swapped_as_lapack_swaps_them() -> None:
    """A zero leading entry needs a row swap (without one the first step divides by zero);
    ties in magnitude pick the first row, as LAPACK's idamax: det's sign follows."""
    a = torch.tensor(
        [
            [[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [-1.0, 2.0, 0.0]],  # tie: rows 1 and 2
            [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]],  # a permutation
        ],
        dtype=torch.float64,
    )
    b = torch.arange(6, dtype=torch.float64).reshape(1, 3, 2).expand(2, 3, 2)
    inputs = (a, b, b[..., 0])
    program, _ = linalg_in_math_form(torch, torch.export.export(Everything(), inputs))
    got = program.module()(*inputs)
    want = Everything()(*inputs)
    _compare(want[:9], got[:9], 1e-12)  # inv, solve, det, slogdet, logdet
    assert got[4].tolist() == pytest.approx([float(torch.linalg.det(m)) for m in a])
    assert torch.isfinite(got[0]).all()


def test_dynamic_batch() -> None:
    batch = torch.export.Dim("batch", min=2, max=64)
    inputs = _inputs(4, torch.float32)
    exported = torch.export.export(
        Everything(), inputs, dynamic_shapes=({0: batch}, {0: batch}, {0: batch})
    )
    program, count = linalg_in_math_form(torch, exported)
    assert count == 15
    for size in (2, 9):
        other = _inputs(4, torch.float32, batch=size, seed=size)
        _compare(Everything()(*other), program.module()(*other), 2e-5)


def test_singular_matrix_gives_inf_or_nan_not_an_error() -> None:
    class Inverse(torch.nn.Module):
        def forward(self, a: Any) -> tuple[Any, Any]:
            return torch.linalg.inv(a), torch.linalg.det(a)

    singular = torch.tensor([[[1.0, 2.0], [2.0, 4.0]]])
    program, _ = linalg_in_math_form(torch, torch.export.export(Inverse(), (singular,)))
    inverse, det = program.module()(singular)
    assert float(det) == 0.0 and not torch.isfinite(inverse).all()
    with pytest.raises(RuntimeError, match="singular"):  # torch's eager call raises
        torch.linalg.inv(singular)


def test_left_alone() -> None:
    """No form: matrices above the size limits, a dynamic matrix size, a right-hand solve."""

    class Others(torch.nn.Module):
        def forward(self, a: Any, big: Any, b: Any) -> tuple[Any, ...]:
            return (
                torch.linalg.inv(big),  # 65 x 65
                torch.linalg.cholesky(big @ big.mT),
                torch.linalg.solve(a, b.mT, left=False),
                torch.linalg.svd(big)[1],
                torch.linalg.eigh(big @ big.mT)[0],
                torch.linalg.svdvals(big[..., :3, :]),  # 3 x 65
                torch.linalg.pinv(big[..., :3]),
                torch.linalg.pinv(big @ big.mT, hermitian=True),
                torch.linalg.qr(big[..., :3])[1],  # 65 rows
            )

    n = SIZE_LIMIT + 1
    inputs = (torch.randn(2, 6, 6), torch.randn(2, n, n), torch.randn(2, 6, 6))
    exported = torch.export.export(Others(), inputs)
    assert linalg_in_math_form(torch, exported) == (exported, 0)

    class Dynamic(torch.nn.Module):
        def forward(self, a: Any) -> Any:
            return torch.linalg.inv(a)

    side = torch.export.Dim("side", min=2, max=8)
    exported = torch.export.export(
        Dynamic(), (torch.randn(4, 4),), dynamic_shapes=({0: side, 1: side},)
    )
    assert linalg_in_math_form(torch, exported) == (exported, 0)


class Spectral(torch.nn.Module):
    def forward(self, a: Any) -> tuple[Any, ...]:
        sym = a + a.mT
        u, s, vh = torch.linalg.svd(a)
        old_u, old_s, old_v = torch.svd(a)
        values, vectors = torch.linalg.eigh(sym)
        upper = torch.linalg.eigvalsh(torch.triu(sym), UPLO="U")
        return u, s, vh, torch.linalg.svdvals(a), old_u, old_s, old_v, values, vectors, upper


def _signs_aligned(got: Any, want: Any) -> Any:
    """`got`'s columns flipped to point as `want`'s do (vectors are unique up to sign)."""
    return got * torch.sign((got * want).sum(-2, keepdim=True))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9, 16, 33, SIZE_LIMIT])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_svd_and_eigh_agree_with_lapack(n: int, dtype: Any, tol: float) -> None:
    a = torch.randn(32, n, n, generator=torch.Generator().manual_seed(n), dtype=dtype)
    exported = torch.export.export(Spectral(), (a,))
    assert len(calls_of(exported, LINALG_OPS)) == 5  # control: the calls are there
    program, count = linalg_in_math_form(torch, exported)
    assert count == 5 and calls_of(program, LINALG_OPS) == []
    u, s, vh, svdvals, old_u, old_s, old_v, values, vectors, upper = program.module()(a)
    want = Spectral()(a)
    eye = torch.eye(n, dtype=dtype)
    scale = max(float(a.abs().max()), 1.0)
    assert torch.allclose(s, want[1], atol=tol * scale) and torch.equal(s, svdvals)
    assert torch.equal(old_s, s) and torch.equal(old_v, vh.mT) and torch.equal(old_u, u)
    assert torch.allclose(u @ torch.diag_embed(s) @ vh, a, atol=tol * scale)
    assert torch.allclose(u.mT @ u, eye, atol=tol) and torch.allclose(vh @ vh.mT, eye, atol=tol)
    assert torch.allclose(u @ vh, want[0] @ want[2], atol=tol * scale)  # sign-free
    assert torch.allclose(values, want[7], atol=tol * scale)
    assert torch.allclose(upper, want[9], atol=tol * scale)
    assert torch.allclose(_signs_aligned(vectors, want[8]), want[8], atol=100 * tol)
    assert torch.allclose(vectors.mT @ vectors, eye, atol=tol)


class Factorisations(torch.nn.Module):
    def forward(self, a: Any) -> tuple[Any, ...]:
        spd = a @ a.mT + torch.eye(a.shape[-1])
        q = torch.linalg.qr(a, mode="complete")[0]
        return torch.linalg.svdvals(a), q, torch.linalg.inv(a), torch.linalg.cholesky(spd)


def _graph_ops(program: Any) -> tuple[int, list[int]]:
    """(ops in the program's graph, ops in each while_loop body it calls)."""
    graph = program.graph_module
    ops = [node for node in graph.graph.nodes if node.op == "call_function"]
    bodies = [
        getattr(graph, node.args[1].target)
        for node in ops
        if node.target is torch.ops.higher_order.while_loop
    ]
    body_ops = [sum(n.op == "call_function" for n in body.graph.nodes) for body in bodies]
    return len(ops), body_ops


def test_rotations_and_reflections_are_one_step_in_a_loop_whatever_the_size() -> None:
    """The Jacobi steps, the Householder reflections (and Q's), LU's eliminations, the
    substitutions and Cholesky's columns are a while_loop each of one step: at 64 columns the
    graph is the size it is at 5 (control: the steps written out one after another, as before
    2026-12-07, make the graph at 16 many times larger, and the check fails); up to
    `loop.WRITTEN_OUT` steps are written out (at 3 columns only the rotations loop)."""

    def ops_for(n: int) -> tuple[int, list[int]]:
        exported = torch.export.export(Factorisations(), (torch.randn(3, n, n),))
        return _graph_ops(linalg_in_math_form(torch, exported)[0])

    small, large = ops_for(loop.WRITTEN_OUT + 1), ops_for(SIZE_LIMIT)
    assert len(small[1]) == len(large[1]) == 7  # 1 + QR 2 + inv 3 (LU, 2 substitutions) + 1
    assert len(ops_for(3)[1]) == 1  # the rotations' 5 x 3 steps loop, the others' 3 do not
    assert large[0] <= small[0] + 10 and large[1] == small[1], (small, large)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "WRITTEN_OUT", 10**6)  # every step written out
        written_out = ops_for(16)
    assert written_out[1] == [] and written_out[0] > 10 * large[0], (large, written_out)


def test_picked_takes_a_column_or_a_row_at_a_position_mask() -> None:
    """loop.picked, the steps' way to read at a position: a column, a row (`rows`), kept dims,
    integer values kept integer (control: another position gives other entries)."""
    m = torch.arange(12.0).view(3, 4)
    at_column, at_row = torch.arange(4) == 2, torch.arange(3) == 1
    assert torch.equal(loop.picked(torch, m, at_column), m[:, 2])
    assert torch.equal(loop.picked(torch, m, at_column, keepdim=True), m[:, 2:3])
    assert torch.equal(loop.picked(torch, m, at_row, rows=True), m[1])
    assert torch.equal(loop.picked(torch, m, at_row, rows=True, keepdim=True), m[1:2])
    order = loop.picked(torch, torch.arange(4), at_column)
    assert order.dtype == torch.int64 and int(order) == 2
    assert not torch.equal(loop.picked(torch, m, torch.arange(4) == 3), m[:, 2])


@pytest.mark.parametrize("n", [4, 8])
def test_small_eigenvalues_of_an_ill_conditioned_covariance(n: int) -> None:
    """float32 covariances of condition 1e4: the smallest eigenvalue within LAPACK's own
    relative error of the exact one (of the float32 matrix, in float64); control: the
    shifted matrix's singular values less the shift lose rounding times the norm and miss."""
    g = torch.Generator().manual_seed(n)
    q, _ = torch.linalg.qr(torch.randn(200, n, n, generator=g, dtype=torch.float64))
    values = torch.logspace(3, -1, n, dtype=torch.float64)
    covariance = (q @ torch.diag_embed(values.expand(200, n)) @ q.mT).float()
    exact = torch.linalg.eigvalsh(covariance.double())[..., 0]

    def worst(smallest: Any) -> float:
        return float(((smallest.double() - exact).abs() / exact).max())

    lapack = worst(torch.linalg.eigvalsh(covariance)[..., 0])
    assert worst(jacobi.eigh(torch, covariance, lower=True)[0][..., 0]) <= lapack
    shift = covariance.square().sum((-2, -1), keepdim=True).sqrt()
    eye = torch.eye(n, dtype=covariance.dtype)
    norms = jacobi.rotated_columns(torch, covariance + shift * eye)[0]
    assert worst((norms - shift.squeeze(-1)).min(-1).values) > lapack


def test_repeated_singular_values() -> None:
    """A rotation: every singular value 1, U and V not unique, U Vh the rotation itself."""
    angle = torch.tensor(0.7, dtype=torch.float64)
    c, s = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack(
        [
            torch.stack([c, -s, c * 0]),
            torch.stack([s, c, c * 0]),
            torch.tensor([0.0, 0, 1]).double(),
        ]
    )[None]
    program, _ = linalg_in_math_form(torch, torch.export.export(Spectral(), (rotation,)))
    u, values, vh = program.module()(rotation)[:3]
    assert torch.allclose(values, torch.ones(1, 3, dtype=torch.float64), atol=1e-14)
    assert torch.allclose(u @ vh, rotation, atol=1e-14)


class Pose(torch.nn.Module):
    """Keypoints regressed, a covariance solve and its log-determinant, a camera matrix
    inverted per sample: linear algebra on data, as a pose head does."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(30, 64), torch.nn.ReLU(), torch.nn.Linear(64, 30)
        )

    def forward(self, x: Any, camera: Any) -> tuple[Any, ...]:
        points = self.net(x).view(-1, 10, 3)
        centred = points - points.mean(1, keepdim=True)
        cov = centred.mT @ centred + torch.eye(3)
        weights = torch.linalg.solve(cov, torch.ones(x.shape[0], 3, 1))
        projected = (torch.linalg.inv(camera) @ points.mT).mT
        return projected, weights, torch.linalg.slogdet(cov)[1], torch.linalg.cholesky(cov)


def _pose_inputs() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1)
    camera = torch.tensor([[500.0, 0.0, 32.0], [0.0, 480.0, 24.0], [0.0, 0.0, 1.0]])
    return torch.randn(4, 30, generator=g), camera + 0.1 * torch.randn(4, 3, 3, generator=g)


def _compiled_matches_eager(model: Any, inputs: tuple[Any, ...], pt2: Path, calls: int) -> Any:
    """`model` compiled in its math form and run on the slim CPU runtime (the run), after
    checking that `calls` linear algebra calls were rewritten and every output is eager's
    within 1e-4 of its scale."""
    run = compile_in_math_form_and_run(torch, model, inputs, pt2)
    assert any(f"{calls} linear algebra call(s)" in note for note in run.notes), run.notes
    with torch.no_grad():
        want = [t.numpy() for t in model(*inputs)]
    for got, expected in zip(run.outputs, want, strict=True):
        assert np.abs(got - expected).max() <= 1e-4 * max(np.abs(expected).max(), 1.0)
    return run


@pytest.mark.slow
def test_pose_model_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    _compiled_matches_eager(Pose().eval(), _pose_inputs(), tmp_path / "pose.pt2", calls=4)


class Kabsch(torch.nn.Module):
    """Predicted points aligned to a template by the rotation the SVD of their covariance
    gives (with the reflection fixed by the determinant's sign), as point-cloud registration
    and protein-structure heads do."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.net = torch.nn.Linear(30, 30)
        self.register_buffer("template", torch.randn(10, 3))

    def forward(self, x: Any) -> tuple[Any, ...]:
        points = self.net(x).view(-1, 10, 3)
        p = points - points.mean(1, keepdim=True)
        t = self.template - self.template.mean(0)
        u, _, vh = torch.linalg.svd(p.mT @ t)
        flip = torch.ones_like(u[..., 0, :])
        flip[..., -1] = torch.sign(torch.linalg.det(u @ vh))
        rotation = u @ torch.diag_embed(flip) @ vh
        return p @ rotation, rotation


@pytest.mark.slow
def test_kabsch_alignment_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    inputs = (torch.randn(6, 30, generator=torch.Generator().manual_seed(3)),)
    _compiled_matches_eager(Kabsch().eval(), inputs, tmp_path / "kabsch.pt2", calls=2)


class FrameAndFit(torch.nn.Module):
    """A rotation from a predicted 3 x 2 matrix (the 6-D rotation representation, its
    columns orthonormalised by QR, the third their cross product), and a least-squares fit
    of predicted points by the pseudo-inverse (torch.export cannot export lstsq)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.net = torch.nn.Linear(16, 6 + 24)

    def forward(self, x: Any) -> tuple[Any, ...]:
        out = self.net(x)
        q, r = torch.linalg.qr(out[:, :6].view(-1, 3, 2))
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
        rotation = torch.cat([q, torch.linalg.cross(q[..., 0], q[..., 1]).unsqueeze(-1)], -1)
        points = out[:, 6:].view(-1, 8, 3)
        design = torch.cat([points[..., :2], torch.ones_like(points[..., :1])], -1)
        plane = torch.linalg.pinv(design) @ points[..., 2:]
        return rotation, plane


@pytest.mark.slow
def test_frame_and_fit_run_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    inputs = (torch.randn(5, 16, generator=torch.Generator().manual_seed(6)),)
    run = _compiled_matches_eager(FrameAndFit().eval(), inputs, tmp_path / "frame.pt2", calls=2)
    rotation = run.outputs[0]
    assert np.allclose(rotation @ rotation.transpose(0, 2, 1), np.eye(3), atol=1e-5)


class TallQR(torch.nn.Module):
    """A QR of 70 x 6 matrices: more rows than SIZE_LIMIT, so no form."""

    def forward(self, x: Any) -> Any:
        return torch.linalg.qr(x.view(-1, 70, 6))[1].relu()


@pytest.mark.slow
class Homography(torch.nn.Module):
    """A homography by the direct linear transform: four predicted corner offsets, the 8 x 9
    system of their correspondences, its last right singular vector (a full SVD of a wide
    matrix, above 4 columns), as image-alignment heads compute it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.net = torch.nn.Linear(12, 8)
        self.register_buffer("corners", torch.tensor([[0.0, 0], [1, 0], [1, 1], [0, 1]]))

    def forward(self, x: Any) -> Any:
        dst = self.corners + 0.1 * torch.tanh(self.net(x)).view(-1, 4, 2)
        src = self.corners.expand_as(dst)
        one, zero = torch.ones_like(src[..., :1]), torch.zeros_like(src[..., :1])
        xs, ys, xd, yd = src[..., :1], src[..., 1:], dst[..., :1], dst[..., 1:]
        rows_x = torch.cat([xs, ys, one, zero, zero, zero, -xd * xs, -xd * ys, -xd], -1)
        rows_y = torch.cat([zero, zero, zero, xs, ys, one, -yd * xs, -yd * ys, -yd], -1)
        vh = torch.linalg.svd(torch.cat([rows_x, rows_y], -2))[2]
        h = vh[:, -1].view(-1, 3, 3)
        return (h / h[:, 2:, 2:],)


@pytest.mark.slow
def test_homography_by_dlt_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    inputs = (torch.randn(5, 12, generator=torch.Generator().manual_seed(8)),)
    _compiled_matches_eager(Homography().eval(), inputs, tmp_path / "dlt.pt2", calls=1)


class Whitening(torch.nn.Module):
    """PCA whitening of 64 features (the eigh of their 64 x 64 covariance) giving each
    sample's Mahalanobis distance, as anomaly heads score, and the spectral norm of a 64 x 40
    projection (svdvals): the loops' largest size. (The distances do not depend on the
    eigenvectors' signs, nor on their choice within the repeated eigenvalue the regularised
    low-rank covariance has.)"""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(9)
        self.net = torch.nn.Linear(16, 64 * 3)
        self.proj = torch.nn.Linear(16, 64 * 40)

    def forward(self, x: Any) -> tuple[Any, ...]:
        features = self.net(x).view(-1, 3, 64).flatten(0, 1)
        centred = features - features.mean(0)
        covariance = centred.mT @ centred / features.shape[0] + 0.1 * torch.eye(64)
        values, vectors = torch.linalg.eigh(covariance)
        white = (centred @ vectors) / values.sqrt()
        norms = torch.linalg.svdvals(self.proj(x).view(-1, 64, 40))
        return values, white.square().sum(-1), norms


@pytest.mark.slow
def test_whitening_of_64_features_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    inputs = (torch.randn(40, 16, generator=torch.Generator().manual_seed(10)),)
    _compiled_matches_eager(Whitening().eval(), inputs, tmp_path / "white.pt2", calls=2)


def test_a_qr_above_the_limit_has_no_form_and_compile_names_it(tmp_path: Path) -> None:
    from shimkit.errors import ShimkitError

    inputs = (torch.randn(2, 420),)
    with pytest.raises(ShimkitError, match="linalg_qr"):
        compile_in_math_form_and_run(torch, TallQR().eval(), inputs, tmp_path / "x.pt2")


def test_batch_dims_broadcast_as_torch_broadcasts_them() -> None:
    class Broadcast(torch.nn.Module):
        def forward(self, a: Any, b: Any, lower: Any) -> tuple[Any, ...]:
            return (
                torch.linalg.solve(a, b),  # [2, 1, n, n] with [3, n, 2]
                torch.cholesky_solve(b, lower),  # one factor for every right-hand side
                torch.linalg.solve_triangular(lower, b, upper=False),
            )

    g = torch.Generator().manual_seed(5)
    a = torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64) + 3 * torch.eye(4)
    b = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    lower = torch.tril(torch.rand(4, 4, generator=g, dtype=torch.float64)) + torch.eye(4)
    inputs = (a, b, lower)
    program, count = linalg_in_math_form(torch, torch.export.export(Broadcast(), inputs))
    assert count == 3
    got, want = program.module()(*inputs), Broadcast()(*inputs)
    assert [tuple(t.shape) for t in got] == [(2, 3, 4, 2), (3, 4, 2), (3, 4, 2)]
    _compare(want, got, 1e-12)


class Orthogonal(torch.nn.Module):
    def forward(self, a: Any) -> tuple[Any, ...]:
        q, r = torch.linalg.qr(a)
        full_q, full_r = torch.linalg.qr(a, mode="complete")
        empty, r_only = torch.linalg.qr(a, mode="r")
        old_q, old_r = torch.qr(a, some=False)
        return q, r, full_q, full_r, empty, r_only, old_q, old_r


QR_SHAPES = [(1, 1), (3, 3), (5, 3), (3, 5), (2, 7), (16, 4), (4, 16), (16, 16), (64, 40), (24, 64)]


@pytest.mark.parametrize(("m", "n"), QR_SHAPES)
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_qr_is_lapacks_signs_included(m: int, n: int, dtype: Any, tol: float) -> None:
    import warnings

    a = torch.randn(3, m, n, generator=torch.Generator().manual_seed(m * 31 + n), dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch.qr is deprecated
        exported = torch.export.export(Orthogonal(), (a,))
        want = Orthogonal()(a)
    assert len(calls_of(exported, LINALG_OPS)) == 4  # control: the calls are there
    program, count = linalg_in_math_form(torch, exported)
    assert count == 4 and calls_of(program, LINALG_OPS) == []
    got = program.module()(a)
    assert [t.shape for t in got] == [t.shape for t in want]
    # Not only Q R = A: the same Q and R, since the reflections are LAPACK's.
    _compare(want, got, tol)


def test_qr_of_a_column_already_reduced_reflects_nothing() -> None:
    """Where the column below the diagonal is zero, LAPACK's dlarfg makes no reflection (tau
    0): R keeps the entry's sign, so an upper-triangular matrix with a positive diagonal is
    its own R, with Q the identity, where the usual formula would flip both."""
    g = torch.Generator().manual_seed(9)
    a = (torch.triu(torch.rand(4, 4, generator=g, dtype=torch.float64)) + torch.eye(4))[None]
    a[..., 1, 1] = -a[..., 1, 1]
    program, _ = linalg_in_math_form(torch, torch.export.export(Orthogonal(), (a,)))
    q, r = program.module()(a)[:2]
    want_q, want_r = torch.linalg.qr(a)
    assert torch.equal(r, a) and torch.equal(q, torch.eye(4, dtype=torch.float64)[None])
    _compare((want_q, want_r), (q, r), 1e-14)


class Rectangular(torch.nn.Module):
    def forward(self, a: Any) -> tuple[Any, ...]:
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        old_u, old_s, old_v = torch.svd(a)  # some=True: reduced
        return u, s, vh, torch.linalg.svdvals(a), old_u, old_s, old_v


@pytest.mark.parametrize(("m", "n"), [(16, 3), (3, 16), (8, 9), (9, 8), (16, 12), (7, 1), (1, 7)])
def test_non_square_svd_agrees_with_lapack(m: int, n: int) -> None:
    dtype, tol = torch.float64, 1e-12
    a = torch.randn(8, m, n, generator=torch.Generator().manual_seed(m + 7 * n), dtype=dtype)
    exported = torch.export.export(Rectangular(), (a,))
    program, count = linalg_in_math_form(torch, exported)
    assert count == 3 and calls_of(program, LINALG_OPS) == []
    u, s, vh, svdvals, old_u, old_s, old_v = program.module()(a)
    want = Rectangular()(a)
    k = min(m, n)
    assert u.shape == (8, m, k) and vh.shape == (8, k, n) and old_v.shape == (8, n, k)
    scale = max(float(a.abs().max()), 1.0)
    assert torch.allclose(s, want[1], atol=tol * scale) and torch.equal(s, svdvals)
    assert torch.equal(old_s, s) and torch.equal(old_v, vh.mT) and torch.equal(old_u, u)
    assert torch.allclose(u @ torch.diag_embed(s) @ vh, a, atol=tol * scale)
    eye = torch.eye(k, dtype=dtype)
    assert torch.allclose(u.mT @ u, eye, atol=tol) and torch.allclose(vh @ vh.mT, eye, atol=tol)
    assert torch.allclose(u @ vh, want[0] @ want[2], atol=tol * scale)  # sign-free


class FullRectangular(torch.nn.Module):
    def forward(self, a: Any) -> tuple[Any, ...]:
        u, s, vh = torch.linalg.svd(a)  # full_matrices=True
        old_u, old_s, old_v = torch.svd(a, some=False)
        return u, s, vh, old_u, old_s, old_v


@pytest.mark.parametrize(("m", "n"), [(16, 3), (3, 16), (8, 9), (9, 8), (7, 1), (1, 7)])
def test_full_svd_of_a_non_square_matrix_completes_the_basis(m: int, n: int) -> None:
    """U (or Vh, for a wide matrix) square and orthonormal, its first columns the reduced
    SVD's, the rest spanning what torch's span (the projector on them is torch's)."""
    dtype, tol = torch.float64, 1e-12
    a = torch.randn(8, m, n, generator=torch.Generator().manual_seed(m + 5 * n), dtype=dtype)
    exported = torch.export.export(FullRectangular(), (a,))
    program, count = linalg_in_math_form(torch, exported)
    assert count == 2 and calls_of(program, LINALG_OPS) == []
    u, s, vh, old_u, old_s, old_v = program.module()(a)
    want_u, want_s, want_vh = torch.linalg.svd(a)
    assert u.shape == (8, m, m) and vh.shape == (8, n, n) and old_v.shape == (8, n, n)
    assert torch.equal(old_u, u) and torch.equal(old_s, s) and torch.equal(old_v, vh.mT)
    k = min(m, n)
    scale = max(float(a.abs().max()), 1.0)
    assert torch.allclose(s, want_s, atol=tol * scale)
    assert torch.allclose(u[..., :k] @ torch.diag_embed(s) @ vh[..., :k, :], a, atol=tol * scale)
    for got, want in ((u, want_u), (vh.mT, want_vh.mT)):
        eye = torch.eye(got.shape[-1], dtype=dtype)
        assert torch.allclose(got.mT @ got, eye, atol=tol)
        rest, want_rest = got[..., k:], want[..., k:]
        assert torch.allclose(rest @ rest.mT, want_rest @ want_rest.mT, atol=tol)


def test_a_zero_singular_value_has_a_unit_singular_vector() -> None:
    """Coplanar points: their covariance has rank 2, and U's third column is a unit vector
    orthogonal to the others, as LAPACK's, so Kabsch's rotation is a rotation (control: the
    normalised rotated column alone is not)."""
    g = torch.Generator().manual_seed(5)
    points = torch.randn(6, 10, 3, generator=g, dtype=torch.float64)
    points[..., 2] = 0
    turn = torch.linalg.matrix_exp(torch.tensor([[0, -0.3, 0.2], [0.3, 0, -0.1], [-0.2, 0.1, 0]]))
    covariance = points.mT @ (points @ turn.double())
    covariance[0] = 0  # rank 0: U is the identity
    program, _ = linalg_in_math_form(torch, torch.export.export(Spectral(), (covariance,)))
    u, s, vh = program.module()(covariance)[:3]
    eye = torch.eye(3, dtype=torch.float64).expand(6, 3, 3)
    assert torch.allclose(u.mT @ u, eye, atol=1e-12)
    assert torch.allclose(u @ torch.diag_embed(s) @ vh, covariance, atol=1e-12)
    assert torch.allclose(torch.linalg.det(u @ vh).abs(), torch.ones(6, dtype=torch.float64))
    columns = covariance @ vh.mT  # U diag(S): the rotated columns before normalising
    unit = columns / columns.norm(dim=-2, keepdim=True).clamp_min(1e-300)
    assert not torch.allclose(unit.mT @ unit, eye, atol=1e-3)


class PseudoInverse(torch.nn.Module):
    def forward(self, a: Any, sym: Any, cutoff: Any) -> tuple[Any, ...]:
        return (
            torch.linalg.pinv(a),
            torch.linalg.pinv(a.mT, rtol=0.3),
            torch.linalg.pinv(a, atol=cutoff),
            torch.linalg.pinv(sym, hermitian=True),
            torch.linalg.pinv(sym, hermitian=True, atol=0.5, rtol=0.1),
        )


@pytest.mark.parametrize("rank", [3, 2])
def test_pinv_is_torchs(rank: int) -> None:
    """pinv with torch's default tolerance, a relative and an absolute one (a tensor), and
    of symmetric matrices (hermitian); `rank` 2: a 6 x 3 matrix of rank 2, whose smallest
    singular value (rounding's) the default tolerance cuts off."""
    g = torch.Generator().manual_seed(rank)
    left = torch.randn(4, 6, rank, generator=g, dtype=torch.float64)
    a = left @ torch.randn(4, rank, 3, generator=g, dtype=torch.float64)
    sym = torch.randn(4, 4, 4, generator=g, dtype=torch.float64)
    sym = sym + sym.mT
    inputs = (a, sym, torch.tensor(0.8, dtype=torch.float64))
    exported = torch.export.export(PseudoInverse(), inputs)
    program, count = linalg_in_math_form(torch, exported)
    assert count == 5 and calls_of(program, LINALG_OPS) == []
    got, want = program.module()(*inputs), PseudoInverse()(*inputs)
    _compare(want, got, 1e-10)
    if rank == 2:  # control: without the cutoff the result would be far off
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        uncut = vh.mT @ torch.diag_embed(1 / s) @ u.mT
        assert not torch.allclose(uncut, want[0], atol=1.0)
