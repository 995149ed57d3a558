"""Linear algebra on small matrices in its math form (shimkit.aot.linalg): inv, solve, det,
slogdet, logdet, cholesky, cholesky_solve and solve_triangular against torch's LAPACK
results, in float64 and float32, sizes 1 to 16, batched and with a dynamic batch; matrices
that need row swaps; what is left alone; and a pose-style model compiled for the slim CPU
runtime (control: with an SVD, which has no form, compile refuses it and names the op)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
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
        scale = max(float(w.abs().max()), 1.0)  # log|det| of 0 is LAPACK's -4e-16 here
        err = float((w - g).abs().max()) / scale
        assert err <= rtol, (i, err)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, SIZE_LIMIT])
@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 1e-12), (torch.float32, 2e-5)])
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
    """No form: matrices above the size limit, a dynamic matrix size, a right-hand solve,
    and the decompositions (SVD, eigh, QR)."""

    class Others(torch.nn.Module):
        def forward(self, a: Any, big: Any, b: Any) -> tuple[Any, ...]:
            return (
                torch.linalg.inv(big),
                torch.linalg.solve(a, b.mT, left=False),
                torch.linalg.svd(a)[1],
                torch.linalg.eigh(a @ a.mT)[0],
                torch.linalg.qr(a)[1],
            )

    n = SIZE_LIMIT + 1
    inputs = (torch.randn(2, 3, 3), torch.randn(2, n, n), torch.randn(2, 3, 3))
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


class Pose(torch.nn.Module):
    """Keypoints regressed, a covariance solve and its log-determinant, a camera matrix
    inverted per sample: linear algebra on data, as a pose head does."""

    def __init__(self, svd: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(30, 64), torch.nn.ReLU(), torch.nn.Linear(64, 30)
        )
        self.svd = svd

    def forward(self, x: Any, camera: Any) -> tuple[Any, ...]:
        points = self.net(x).view(-1, 10, 3)
        centred = points - points.mean(1, keepdim=True)
        cov = centred.mT @ centred + torch.eye(3)
        weights = torch.linalg.solve(cov, torch.ones(x.shape[0], 3, 1))
        projected = (torch.linalg.inv(camera) @ points.mT).mT
        out = (projected, weights, torch.linalg.slogdet(cov)[1], torch.linalg.cholesky(cov))
        if self.svd:
            out = (*out, torch.linalg.svdvals(cov))
        return out


def _pose_inputs() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1)
    camera = torch.tensor([[500.0, 0.0, 32.0], [0.0, 480.0, 24.0], [0.0, 0.0, 1.0]])
    return torch.randn(4, 30, generator=g), camera + 0.1 * torch.randn(4, 3, 3, generator=g)


@pytest.mark.slow
def test_pose_model_runs_on_the_slim_cpu_runtime(tmp_path: Path) -> None:
    model, inputs = Pose().eval(), _pose_inputs()
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "pose.pt2")
    assert any("4 linear algebra call(s)" in note for note in run.notes), run.notes
    with torch.no_grad():
        want = [t.numpy() for t in model(*inputs)]
    for got, expected in zip(run.outputs, want, strict=True):
        scale = np.abs(expected).max()
        assert np.abs(got - expected).max() <= 1e-4 * scale


@pytest.mark.slow
def test_svd_has_no_form_and_compile_names_it(tmp_path: Path) -> None:
    from shimkit.errors import ShimkitError

    with pytest.raises(ShimkitError, match="_linalg_svd"):
        compile_in_math_form_and_run(
            torch, Pose(svd=True).eval(), _pose_inputs(), tmp_path / "x.pt2"
        )
