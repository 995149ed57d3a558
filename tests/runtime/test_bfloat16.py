"""bfloat16 tensors in and out of the slim CPU runtime from Python.

numpy has no bfloat16: the runtime hands such outputs back as ml_dtypes' bfloat16 arrays and
takes torch bfloat16 tensors (the same bits) or such arrays as inputs. A small bfloat16 model
compiled by shimkit runs from either and matches eager; a float32 array for the bfloat16
input is refused naming the file (control), and without ml_dtypes the one line says what to
install. `shimkit run` takes bfloat16 arrays saved by numpy (raw 2-byte values) and saves its
bfloat16 outputs the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shimkit.errors import ShimkitError
from shimkit.runtime.capi import numpy_dtype


def test_bfloat16_is_ml_dtypes_type() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert numpy_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert numpy_dtype("float32") == np.float32


def test_without_ml_dtypes_the_error_says_what_to_install(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails as if absent
    with pytest.raises(ShimkitError, match="bfloat16 tensors need the ml_dtypes package"):
        numpy_dtype("bfloat16")
    assert numpy_dtype("int64") == np.int64  # other types do not need it


@pytest.mark.slow
def test_a_bfloat16_model_runs_from_torch_tensors_and_arrays(tmp_path: Path, run_shimkit) -> None:
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import shimkit.runtime
    from shimkit.aot.compile import compile_exported

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    model = model.eval().to(torch.bfloat16)
    x = torch.randn(4, 16).to(torch.bfloat16)
    out = tmp_path / "bf16.pt2"
    compile_exported(torch.export.export(model, (x,)), out, force=True, show_progress=False)
    with torch.no_grad():
        expected = model(x).float().numpy()
    with shimkit.runtime.load(out) as slim:
        [from_tensor] = slim(x)
        as_array = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        [from_array] = slim(as_array)
        [again] = slim(as_array)  # the fast path, once the geometry is known
        assert slim.fast_calls >= 1
        with pytest.raises(ShimkitError, match=r"bf16\.pt2.*expected dtype bfloat16, got float32"):
            slim(x.float().numpy())
    assert from_tensor.dtype == np.dtype(ml_dtypes.bfloat16) and from_tensor.shape == (4, 8)
    # bfloat16 keeps 8 bits of mantissa: within two of its steps of eager's bfloat16.
    scale = np.abs(expected).max()
    np.testing.assert_allclose(from_tensor.astype(np.float32), expected, atol=scale * 2**-6)
    np.testing.assert_array_equal(from_array.view(np.int16), from_tensor.view(np.int16))
    np.testing.assert_array_equal(again.view(np.int16), from_tensor.view(np.int16))
    # From the command line: numpy saves a bfloat16 array as raw 2-byte values ('<V2'),
    # which `shimkit run` takes as bfloat16 where the package expects it, and writes the
    # outputs back the same way.
    saved = tmp_path / "x.npy"
    np.save(saved, as_array)
    assert np.load(saved).dtype == np.dtype("V2")  # what a reader gets back
    proc = run_shimkit(["run", str(out), "--input", str(saved), "--save-dir", str(tmp_path / "o")])
    assert proc.returncode == 0, proc.stderr
    assert "output 0: bfloat16 [4, 8]  min" in proc.stdout
    written = np.load(tmp_path / "o" / "out0.npy")
    np.testing.assert_array_equal(written.view(np.int16), from_tensor.view(np.int16))
    # Control: the raw values as they load are refused by the Python API, naming the file.
    with shimkit.runtime.load(out) as slim, pytest.raises(ShimkitError, match=r"bf16\.pt2"):
        slim(np.load(saved))
