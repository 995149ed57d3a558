"""Real AOTInductor blobs on the slim runtime, next to libtorch, against eager."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import shimkit.runtime as rt
import torch
from shimkit.errors import ShimkitError

MODELS = ["mlp", "convnet_cl", "topk"]


def _assert_matches(outputs: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_libtorch_really_is_global(libtorch_global) -> None:
    """Precondition for every test here: unprefixed shims resolve to libtorch."""
    default = ctypes.CDLL(None)
    assert hasattr(default, "aoti_torch_empty_strided")


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("check_inputs", ["1", "0"])
def test_model_matches_eager(cases, name: str, check_inputs: str, monkeypatch) -> None:
    monkeypatch.setenv("AOTI_RUNTIME_CHECK_INPUTS", check_inputs)
    case = cases[name]
    with rt.load(case.pt2) as model:
        _assert_matches(model(*case.inputs), case.expected)
        _assert_matches(model(*case.inputs), case.expected)  # preallocated-output path


@pytest.mark.parametrize("name", MODELS)
def test_torch_tensors_in(cases, name: str) -> None:
    case = cases[name]
    with rt.load(case.pt2) as model:
        _assert_matches(model(*[torch.from_numpy(a) for a in case.inputs]), case.expected)


def test_blob_so_loads_without_the_package(cases, tmp_path) -> None:
    import zipfile

    case = cases["mlp"]
    with zipfile.ZipFile(case.pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        blob = tmp_path / "mlp.so"
        blob.write_bytes(archive.read(member))
    with rt.load(blob) as model:
        assert model.input_specs is None
        _assert_matches(model(*case.inputs), case.expected)


def test_a_loaded_model_keeps_no_copy_of_the_blob(cases) -> None:
    # The runtime's memory file holds the blob; the Python object keeps where it came from.
    case = cases["mlp"]
    source = rt.read_blob(case.pt2)
    assert len(source.data) > 0  # control: what load() reads does hold the bytes
    with rt.load(case.pt2) as model:
        assert model.source.data == b"" and model.source.path == case.pt2
        _assert_matches(model(*case.inputs), case.expected)


def test_outputs_do_not_alias_between_calls(cases) -> None:
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        first = model(*case.inputs)[0]
        model(*[a * 2 for a in case.inputs])
        np.testing.assert_allclose(first, case.expected[0], rtol=1e-5, atol=1e-5)


def test_negative_control_wrong_weights_are_detected(cases) -> None:
    """The comparison can fail: feeding other inputs gives other outputs."""
    case = cases["mlp"]
    with rt.load(case.pt2) as model:
        out = model(*[a + 1 for a in case.inputs])
    with pytest.raises(AssertionError):
        _assert_matches(out, case.expected)


def test_reused_input_array_is_read_afresh(cases) -> None:
    """The hot path caches the last input's descriptor: in-place edits, a
    reshaped view of the same buffer and a new dtype must all be seen."""
    case = cases["mlp"]
    x = case.inputs[0].copy()
    with rt.load(case.pt2) as model:
        _assert_matches(model(x), case.expected)
        x += 1.0
        with pytest.raises(AssertionError):
            _assert_matches(model(x), case.expected)
        x -= 1.0
        _assert_matches(model(x), case.expected)
        flat = x.reshape(-1)
        flat.shape = (4, 16)  # same buffer, same shape: still fine
        _assert_matches(model(flat), case.expected)
        x.shape = (16, 4)
        with pytest.raises(ShimkitError, match="expected shape"):
            model(x)


def test_concurrent_calls_from_threads(cases) -> None:
    """One model shared by threads (each with its own inputs), and one model per
    thread: every result right. (Without Model's lock, threads overwrite each
    other's descriptors while the GIL is released: this test then fails.)"""
    import threading

    mlp, topk = cases["mlp"], cases["topk"]
    shared = rt.load(mlp.pt2)
    inputs = [mlp.inputs[0] * (1.0 + i) for i in range(4)]
    wanted = [shared(x)[0] for x in inputs]  # serial reference
    failures: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            own = rt.load(topk.pt2)
            for _ in range(100):
                np.testing.assert_array_equal(shared(inputs[i])[0], wanted[i])
                _assert_matches(own(*topk.inputs), topk.expected)
            own.close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared.close()
    assert not failures, failures[0]


def test_closed_model_is_a_clear_error(cases) -> None:
    model = rt.load(cases["mlp"].pt2)
    model.close()
    model.close()  # idempotent
    with pytest.raises(ShimkitError, match="model is closed"):
        model(*cases["mlp"].inputs)
