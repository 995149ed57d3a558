"""Every command that writes a file the user keeps goes through shimkit.fileio, and each,
killed at the worst moment (its file written in full beside the target, not yet renamed
over it), leaves the old file intact; the next run replaces it and sweeps the leftover.

The negative control for the kill itself is test_writing's truncate-then-write writer,
which loses the file at the same moment. Here the control is structural: a scan for file
writes outside shimkit.fileio, shown to catch one.
"""

from __future__ import annotations

import ast
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from shimkit.staging import STAGING_MARKER

from tests.faults.conftest import Cli, clean_env
from tests.runtime.blobs import BlobCase

PACKAGE = Path(__file__).resolve().parents[2] / "lint" / "shimkit"
OLD = b"old contents the user keeps\n"


def _killed_at_the_rename(
    argv: list[str], cwd: Path, target_dir: Path
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child that SIGKILLs itself when shimkit.fileio is about to rename
    a finished temp file over its target in `target_dir` (other os.replace callers, torch's
    caches, and shimkit's own caches, which a first run on a machine fills through
    shimkit.fileio too, pass)."""
    code = (
        "import os, signal, sys\n"
        "real = os.replace\n"
        "def replace(*args, **kwargs):\n"
        "    if (sys._getframe(1).f_globals.get('__name__') == 'shimkit.fileio'\n"
        f"            and os.path.dirname(os.fspath(args[1])) == {str(target_dir)!r}):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(*args, **kwargs)\n"
        "os.replace = replace\n"
        "from shimkit.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if STAGING_MARKER in p.name)


WRITERS = {
    "lint --output": (["lint", "--no-reference", "--output", "{out}", "{so}"], "report.txt"),
    "gate --output": (
        ["gate", "--no-reference", "--baseline", "{tmp}/b.json", "--output", "{out}", "{so}"],
        "report.txt",
    ),
    "gate --update": (
        ["gate", "--no-reference", "--baseline", "{out}", "--update", "{so}"],
        "baseline.json",
    ),
    "header --output": (["header", "--output", "{out}"], "rename.h"),
    "rewrite -o": (["rewrite", "--force", "-o", "{out}", "{so}"], "blob.prefixed.so"),
    "run --save-dir": (["run", "--zeros", "--save-dir", "{dir}", "{pt2}"], "out0.npy"),
    "compile -o": (["compile", "--force", "-o", "{out}", "{model}"], "mlp.pt2"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_killed_writer_keeps_the_old_file(
    cli: Cli,
    tmp_path: Path,
    elf_fixtures: dict[str, Path],
    cases: dict[str, BlobCase],
    repo_root: Path,
    writer: str,
) -> None:
    template, name = WRITERS[writer]
    out_dir = tmp_path / "kept"
    out_dir.mkdir()
    out = out_dir / name
    out.write_bytes(OLD)
    so = tmp_path / "blob_unprefixed.so"
    shutil.copyfile(elf_fixtures["blob_unprefixed.so"], so)
    if writer == "gate --output":  # a baseline to compare against
        cli(["gate", "--no-reference", "--baseline", f"{tmp_path}/b.json", "--update", str(so)])
    fill = {
        "out": out,
        "dir": out_dir,
        "so": so,
        "tmp": tmp_path,
        "pt2": cases["mlp"].pt2,
        "model": repo_root / "examples" / "models" / "mlp.py",
    }
    argv = [part.format(**fill) for part in template]
    killed = _killed_at_the_rename(argv, tmp_path, out_dir)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert out.read_bytes() == OLD  # whole, old, never truncated
    assert len(_leftovers(out_dir)) == 1  # SIGKILL runs no cleanup: the finished temp is left
    if writer == "compile -o":
        return  # a second compile costs a minute; rewrite -o shows staged_output's sweep
    # The next run replaces the file and sweeps the dead run's leftover.
    done = cli(argv, cwd=tmp_path, timeout=600)
    assert done.returncode in (0, 8, 9, 12), done.stderr[-2000:]  # findings are not failures
    assert out.read_bytes() != OLD
    assert _leftovers(out_dir) == []
    if writer == "run --save-dir":
        np.load(out)  # a whole .npy


# --- one home: nothing outside shimkit.fileio writes a kept file itself ----------------

# Build caches publish compiler output (written by gcc, not by us) with os.replace under a
# lock; none of them is a file the user keeps. rewrite fills the temp path staged_output
# hands it.
ALLOWED = {
    ("runtime/build.py", "os.replace"),
    ("aot/rewrite.py", "write_bytes"),
}
WRITES = {"os.replace", "os.rename", "shutil.move", "write_text", "write_bytes"}


def _writes_in(source: str) -> set[str]:
    """The file-writing calls in `source`: os.replace/rename, shutil.move, Path.write_*."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else ""
            dotted = f"{owner}.{func.attr}" if owner in ("os", "shutil") else func.attr
            if dotted in WRITES:
                found.add(dotted)
    return found


def test_no_module_but_fileio_writes_a_file_itself() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "fileio.py":
            continue
        for call in _writes_in(path.read_text()):
            if (relative, call) not in ALLOWED:
                offenders.append(f"{relative}: {call}")
    assert offenders == [], "write kept files through shimkit.fileio"


def test_negative_control_the_scan_finds_a_hand_rolled_write() -> None:
    source = (
        "import os\n"
        "from pathlib import Path\n"
        "def save(p, text):\n"
        "    Path(p + '.tmp').write_text(text)\n"
        "    os.replace(p + '.tmp', p)\n"
    )
    assert _writes_in(source) == {"write_text", "os.replace"}
