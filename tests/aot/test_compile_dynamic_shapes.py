"""`shimkit compile MODEL.py` with the model file's `dynamic_shapes` (torch.export's
argument): the package serves other batch sizes on the slim CPU runtime and matches eager,
and a size outside the compiled range gets one line before the blob runs.
The control compiles the same file with the attribute looked up under another name: the
package is static, and the runtime refuses the other batch size with a clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shimkit.cli import main
from shimkit.errors import ShimkitError

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")

MODEL_FILE = """\
import torch
from torch.export import Dim

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
).eval()
example_inputs = (torch.randn(4, 8),)
dynamic_shapes = ({0: Dim("batch", min=1, max=64)},)
"""


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("dynamic")
    source = folder / "m.py"
    source.write_text(MODEL_FILE)
    built = {}
    for kind, extra in (("dynamic", []), ("static", ["--dynamic-shapes-attr", "not_there"])):
        out = folder / f"{kind}.pt2"
        assert main(["compile", str(source), "-o", str(out), *extra]) == 0
        built[kind] = out
    return built


def _model() -> torch.nn.Module:
    namespace: dict[str, object] = {}
    exec(MODEL_FILE, namespace)
    return namespace["model"]  # type: ignore[return-value]


def test_dynamic_batch_matches_eager(packages: dict[str, Path]) -> None:
    from shimkit.runtime import load

    model = _model()
    with load(packages["dynamic"]) as package:
        for batch in (2, 4, 7, 64):
            x = torch.randn(batch, 8)
            with torch.no_grad():
                expected = model(x).numpy()
            [got] = package(x)
            assert got.shape == (batch, 3)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        # Outside the range the blob was compiled for: one line, before the blob runs.
        for batch, words in ((65, "takes 2 to 64"), (1, "sizes of 2 and more")):
            with pytest.raises(ShimkitError, match=f"size {batch} at dim 0, .*{words}"):
                package(torch.randn(batch, 8))
        [got] = package(torch.randn(3, 8))  # the package still runs afterwards
        assert got.shape == (3, 3)


def test_static_package_refuses_another_batch(packages: dict[str, Path]) -> None:
    from shimkit.runtime import load

    with load(packages["static"]) as package:
        [got] = package(torch.randn(4, 8))
        assert got.shape == (4, 3)
        with pytest.raises(ShimkitError) as caught:
            package(torch.randn(7, 8))
    assert "expected shape [4, 8], got [7, 8]" in str(caught.value)
