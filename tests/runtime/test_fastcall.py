"""Model's C fast call (runtime/python/shimkit_fastcall.c): used, correct, and off when asked."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import shimkit.runtime as rt
import torch
from shimkit.errors import ShimkitError
from shimkit.runtime import fastcall
from shimkit.runtime.capi import DTYPE_CODES


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _python_path_forbidden(model: rt.Model) -> None:
    def boom(inputs: Any) -> list[np.ndarray]:
        raise AssertionError("took the Python path")

    model._call = boom  # type: ignore[method-assign]


def test_extension_builds_and_imports(libs) -> None:
    ext = fastcall.module()
    assert ext is not None, "the fast call extension did not build here"
    assert ext.__file__ is not None and ext.__file__.endswith(".so")


@pytest.mark.parametrize("name", ["mlp", "convnet_cl", "topk"])
def test_fast_path_is_used_and_matches_eager(cases, name: str) -> None:
    case = cases[name]
    with rt.load(case.pt2) as model:
        _close(model(*case.inputs), case.expected)  # validates, learns output geometry
        assert model.fast_calls == 0
        _python_path_forbidden(model)
        for n in range(1, 4):
            _close(model(*case.inputs), case.expected)
            assert model.fast_calls == n


def test_model_call_goes_through_the_runner(cases) -> None:
    """Model.__call__ is the plain Python method; after the first (validating) call it
    runs on the extension's Runner, and behaves as a method (bound access, errors)."""
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        assert type(rt.Model.__dict__["__call__"]).__name__ == "function"
        model(*case.inputs)
        _close(model.__call__(*case.inputs), case.expected)
        _close(rt.Model.__call__(model, *case.inputs), case.expected)
        assert model.fast_calls == 2
        with pytest.raises(TypeError):
            model(*case.inputs, extra=1)
        with pytest.raises(ShimkitError, match="takes 1 inputs"):
            model()


def test_negative_control_fastcall_off(cases, monkeypatch) -> None:
    """SHIMKIT_FASTCALL=0: every call goes through ctypes, still right."""
    monkeypatch.setenv(fastcall.FASTCALL_ENV, "0")
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        for _ in range(3):
            _close(model(*case.inputs), case.expected)
        assert model.fast_calls == 0
        _python_path_forbidden(model)
        with pytest.raises(AssertionError, match="Python path"):
            model(*case.inputs)


def test_unusual_inputs_take_the_python_path(cases) -> None:
    """Torch tensors, non-contiguous and byte-swapped arrays: declined, still right."""
    case = cases["mlp"]
    x = case.inputs[0]
    with rt.load(case.pt2) as model:
        model(x)
        others = [
            torch.from_numpy(x),
            np.asfortranarray(np.repeat(x, 2, axis=1))[:, ::2],
            x.astype(x.dtype.newbyteorder()),  # same values, byte-swapped storage
        ]
        for other in others:
            _close(model(other), case.expected)
        assert model.fast_calls == 0
        _close(model(x), case.expected)
        assert model.fast_calls == 1


def test_outputs_held_by_the_caller_are_never_overwritten(cases) -> None:
    case = cases["mlp"]
    x = case.inputs[0]
    with rt.load(case.pt2) as model:
        model(x)
        kept = model(x)[0]
        view = model(x)[0][1:]
        listed = model(x)
        for _ in range(3):
            model(x * 2)
        _close([kept], case.expected)
        np.testing.assert_allclose(view, case.expected[0][1:], rtol=1e-5, atol=1e-5)
        _close(listed, case.expected)
        assert model.fast_calls == 6


def test_dropped_outputs_are_reused(cases) -> None:
    """An output nobody refers to any more is written again instead of reallocated."""
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        for _ in range(5):
            model(*case.inputs)
        assert model._fast.reused > 0
        before = model._fast.reused
        held = [model(*case.inputs) for _ in range(3)]  # each call's outputs still held
        assert model._fast.reused == before + 1  # only the first, its predecessor was dropped
        for got in held:
            _close(got, case.expected)


def test_shape_change_after_fast_calls_is_checked(cases) -> None:
    case = cases["mlp"]
    x = case.inputs[0].copy()
    with rt.load(case.pt2) as model:
        model(x)
        model(x)
        assert model.fast_calls == 1
        x.shape = (16, 4)
        with pytest.raises(ShimkitError, match="expected shape"):
            model(x)
        with pytest.raises(ShimkitError, match="takes 1 inputs"):
            model(x, x)
        with pytest.raises(ShimkitError, match="expected dtype"):
            model(case.inputs[0].astype(np.float64))
        _close(model(case.inputs[0]), case.expected)
        assert model.fast_calls == 2


@pytest.mark.parametrize("delta", [1, -1])
def test_output_geometry_change_copies_from_model_memory(cases, delta: int) -> None:
    """A fast call whose output comes out in another geometry than the buffer
    it allocated (larger or smaller) is not copied into it: Python copies the
    model-owned output instead, then the Runner's lock is released."""
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        model(*case.inputs)
        wrong = tuple(d + delta for d in case.expected[0].shape)
        code = DTYPE_CODES[case.expected[0].dtype.name]
        model._fast.describe_output(0, case.expected[0].dtype.num, code, wrong)
        _close(model(*case.inputs), case.expected)
        assert model.fast_calls == 1
        _close(model(*case.inputs), case.expected)  # lock released, geometry relearned
        assert model.fast_calls == 2


def test_closed_after_fast_calls(cases) -> None:
    model = rt.load(cases["mlp"].pt2)
    model(*cases["mlp"].inputs)
    model(*cases["mlp"].inputs)
    model.close()
    with pytest.raises(ShimkitError, match="model is closed"):
        model(*cases["mlp"].inputs)


def test_build_failure_falls_back_to_ctypes_with_one_warning(cases, monkeypatch) -> None:
    def broken() -> None:
        raise ShimkitError("shimkit_fastcall.c: does not compile: test")

    monkeypatch.setattr(fastcall, "build_fastcall", broken)
    monkeypatch.setattr(fastcall, "_STATE", {})
    with pytest.warns(RuntimeWarning, match="using ctypes") as caught:
        model = rt.load(cases["mlp"].pt2)
    assert len([w for w in caught if "fast call" in str(w.message)]) == 1
    assert "\n" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with model:
            _close(model(*cases["mlp"].inputs), cases["mlp"].expected)
            _close(model(*cases["mlp"].inputs), cases["mlp"].expected)
            assert model.fast_calls == 0


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a.transpose(0, 2, 3, 1),  # channels_last-like permutation
        lambda a: a[:, ::2, :, ::-1],  # steps and a negative stride
        lambda a: a[:, :1],  # a size-1 dim with a large stride
        lambda a: a.reshape(-1)[::3],
    ],
)
def test_output_copy_handles_any_strides(libs, view: Any) -> None:
    """The fast call copies model-owned outputs of any strides into C order."""
    ext = fastcall.module()
    assert ext is not None
    src = view(np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5))
    dst = np.empty(src.shape, src.dtype)
    ext.copy_output(src, dst)
    np.testing.assert_array_equal(dst, src)
    wrong = np.zeros(src.shape, src.dtype)
    ext.copy_output(np.ascontiguousarray(src[..., ::-1]) if src.ndim > 1 else src[::-1], wrong)
    if src.size > 1:  # negative control: other data gives another copy
        assert not np.array_equal(wrong, src)


def test_failed_run_then_fast_again(cases, tmp_path) -> None:
    """A blob without recorded shapes checks inputs itself: a wrong shape fails
    in the run; the model then relearns its outputs and runs fast again."""
    import zipfile

    case = cases["mlp"]
    with zipfile.ZipFile(case.pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        blob = tmp_path / "mlp.so"
        blob.write_bytes(archive.read(member))
    x = case.inputs[0]
    with rt.load(blob) as model:
        assert model.input_specs is None
        model(x)
        _close(model(x), case.expected)
        assert model.fast_calls == 1
        with pytest.raises(ShimkitError, match="run failed"):
            model(np.ones((x.shape[0] + 1, x.shape[1]), x.dtype))
        for _ in range(3):
            _close(model(x), case.expected)
        assert model.fast_calls == 3


def test_fast_call_that_fails_raises_and_recovers(cases, tmp_path) -> None:
    """A run failing on the fast path: one-line ShimkitError, lock released,
    outputs forgotten (the next good call relearns them on the Python path)."""
    import zipfile

    case = cases["mlp"]
    with zipfile.ZipFile(case.pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        blob = tmp_path / "mlp.so"
        blob.write_bytes(archive.read(member))
    x = case.inputs[0]
    with rt.load(blob) as model:  # no recorded shapes: the blob checks its inputs
        model(x)
        model(x)
        assert model.fast_calls == 1
        good = model._in[0].dtype
        model._in[0].dtype = DTYPE_CODES["float64"]  # the blob will refuse this descriptor
        with pytest.raises(ShimkitError, match="run failed") as info:
            model(x)
        assert "\n" not in str(info.value)
        assert model.fast_calls == 2  # ran on the fast path, then failed
        with pytest.raises(ShimkitError, match="run failed"):
            model(x)  # outputs forgotten: declined, fails on the Python path (no deadlock)
        assert model.fast_calls == 2
        model._in[0].dtype = good
        _close(model(x), case.expected)  # Python path relearns the outputs
        assert model.fast_calls == 2
        _close(model(x), case.expected)
        assert model.fast_calls == 3
