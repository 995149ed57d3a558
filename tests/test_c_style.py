"""The C/C++ style check of `make test` (tools/run_tests.py, clang-format with the
repository's .clang-format) passes on the tree and can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLANG_FORMAT = Path(sys.executable).parent / "clang-format"


def check(paths: list[str]) -> subprocess.CompletedProcess[str]:
    argv = [str(CLANG_FORMAT), f"--style=file:{ROOT / '.clang-format'}", "--dry-run", "-Werror"]
    return subprocess.run([*argv, *paths], capture_output=True, text=True, cwd=ROOT)


def test_tracked_sources_are_formatted() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import run_tests

    sources = run_tests.c_sources()
    assert "shims/cuda/gemm.cpp" in sources and "shims/aoti_shim_rename.h" not in sources
    done = check(sources)
    assert done.returncode == 0, done.stderr[-3000:]


def test_style_check_catches_a_misformatted_file(tmp_path: Path) -> None:
    # Negative control: two statements on one line and a 4-space indent.
    bad = tmp_path / "bad.cpp"
    bad.write_text("int f(int x) {\n    int y = x; return y;\n}\n")
    done = check([str(bad)])
    assert done.returncode != 0 and "bad.cpp" in done.stderr
