"""`shimkit compile` on bad input: clear one-line errors, nothing written. No torch compiles."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from shimkit.aot.modelfile import load_model_file
from shimkit.aot.torchenv import check_version, require_torch
from shimkit.cli import main
from shimkit.errors import ShimkitError
from shimkit.progress import progress


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("shimkit: error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_model_file_without_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write(tmp_path / "m.py", "import torch\nnet = torch.nn.Linear(2, 2)\n")
    out = tmp_path / "o.pt2"
    code, err = run_cli(["compile", str(model), "-o", str(out)], capsys)
    line = error_line(err)
    assert code == 1
    assert "does not define 'model' and 'example_inputs'" in line and str(model) in line
    assert not out.exists()


def test_model_attr_flags_and_wrong_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(tmp_path / "m.py", "import torch\nnet = torch.nn.Linear(2, 2)\nxs = {'a': 1}\n")
    code, err = run_cli(
        ["compile", str(model), "-o", str(tmp_path / "o.pt2"), "--model-attr", "net",
         "--inputs-attr", "xs"],
        capsys,
    )  # fmt: skip
    assert code == 1 and "'xs' is a dict, not a tuple of inputs" in error_line(err)
    model = write(tmp_path / "n.py", "model = 3\nexample_inputs = ()\n")
    code, err = run_cli(["compile", str(model), "-o", str(tmp_path / "o.pt2")], capsys)
    assert code == 1 and "'model' is a int, not a torch.nn.Module" in error_line(err)


def test_model_file_that_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write(tmp_path / "m.py", "raise RuntimeError('weights missing')\n")
    code, err = run_cli(["compile", str(model), "-o", str(tmp_path / "o.pt2")], capsys)
    assert code == 1
    assert "running the model file failed: RuntimeError: weights missing" in error_line(err)


def test_model_file_imports_the_modules_beside_it(tmp_path: Path) -> None:
    """As `python m.py` would, a model file imports its own modules from its directory; two
    model files in two directories with a module of the same name each get their own, and
    sys.path is as it was; a package deeper in the project stays imported. The control:
    without the module beside it, the import fails."""
    torch = require_torch()
    sizes = {}
    for width in (3, 5):
        directory = tmp_path / f"project{width}"
        directory.mkdir()
        write(directory / "layers.py", f"import torch\nWIDTH = {width}\n")
        model = write(
            directory / "m.py",
            "import torch\nfrom layers import WIDTH\n"
            "model = torch.nn.Linear(2, WIDTH)\nexample_inputs = (torch.zeros(1, 2),)\n",
        )
        path_before = list(sys.path)
        net = load_model_file(model, torch).model
        assert sys.path == path_before
        sizes[width] = net.out_features
    assert sizes == {3: 3, 5: 5}
    # A package deeper in the project (a virtualenv's, say) is not the file's own: it stays.
    vendored = tmp_path / "project3" / "venv" / "site"
    (vendored / "vendored_pkg_for_test").mkdir(parents=True)
    write(vendored / "vendored_pkg_for_test" / "__init__.py", "SCALE = 2\n")
    (tmp_path / "project3" / "layers.py").write_text(
        f"import sys\nsys.path.append({str(vendored)!r})\nimport vendored_pkg_for_test\n"
        "WIDTH = 3 * vendored_pkg_for_test.SCALE\n"
    )
    try:
        net = load_model_file(tmp_path / "project3" / "m.py", torch).model
        assert net.out_features == 6
        assert "vendored_pkg_for_test" in sys.modules and "layers" not in sys.modules
    finally:
        sys.modules.pop("vendored_pkg_for_test", None)
        sys.path.remove(str(vendored))
    (tmp_path / "project5" / "layers.py").unlink()
    with pytest.raises(ShimkitError, match="No module named 'layers'"):
        load_model_file(tmp_path / "project5" / "m.py", torch)


def test_export_failure_shows_torchs_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(
        tmp_path / "m.py",
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if x.sum() > 0:\n"
        "            return x + 1\n"
        "        return x - 1\n"
        "model = M()\n"
        "example_inputs = (torch.ones(3),)\n",
    )
    out = tmp_path / "o.pt2"
    code, err = run_cli(["compile", str(model), "-o", str(out)], capsys)
    line = error_line(err)
    assert code == 1 and f"{model}: torch.export failed: " in line
    assert len(line) < 1200
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_existing_output_and_bad_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write(tmp_path / "m.py", "raise SystemExit('must not run')\n")
    out = write(tmp_path / "o.pt2", "keep")
    code, err = run_cli(["compile", str(model), "-o", str(out)], capsys)
    assert code == 1 and "output exists; pass --force" in error_line(err)
    assert out.read_text() == "keep"
    missing_dir = tmp_path / "nope" / "o.pt2"
    code, err = run_cli(["compile", str(model), "-o", str(missing_dir)], capsys)
    assert code == 1 and "does not exist" in error_line(err)


def test_saved_program_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = write(tmp_path / "prog.ep", "not a zip")
    code, err = run_cli(["compile", str(bogus), "-o", str(tmp_path / "o.pt2")], capsys)
    assert code == 1 and "not a saved ExportedProgram" in error_line(err)


def test_torch_version_gate() -> None:
    check_version("2.13.0+cpu")
    check_version("2.6.0")
    with pytest.raises(ShimkitError, match=r"torch 2\.4\.1 is too old.*>= 2\.6.*pip install"):
        check_version("2.4.1")


def test_torch_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ShimkitError, match=r"torch is not importable.*pip install"):
        require_torch()


def test_progress_reports_done_and_failed() -> None:
    stream = io.StringIO()
    with progress("compiling x", stream=stream, interval=0.01):
        pass
    assert stream.getvalue().startswith("compiling x ...\n")
    assert "compiling x: done in" in stream.getvalue()
    stream = io.StringIO()
    with pytest.raises(ValueError), progress("compiling y", stream=stream):
        raise ValueError("boom")
    assert "compiling y: failed in" in stream.getvalue()
