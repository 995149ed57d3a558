"""Ctrl-C or SIGTERM while `shimkit compile` runs its compilers: the compilers stop, their
scratch files (gcc's ccXXXX.s, ...) go, no staging folder or output is left.

Each run starts from an empty Inductor cache (so gcc really runs) and is interrupted at the
worst moment: as soon as a compiler's scratch file shows up in the run's private TMPDIR.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

from tests.faults.conftest import SHIMKIT, clean_env

COMPILERS = {"cc1", "cc1plus", "as", "gcc", "g++", "c++", "collect2", "ld"}


def _scratch_files(tmp: Path) -> list[Path]:
    """Files under the run's private temp folders (shimkit-compile-*) in `tmp`."""
    found: list[Path] = []
    for folder in tmp.glob("shimkit-compile-*"):
        found += [p for p in folder.rglob("*") if p.is_file()]
    return found


def _compilers_of(tmp: Path) -> list[str]:
    """Live compiler processes whose TMPDIR lies under `tmp` (our run's, orphans included)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                head, _, tail = stat.read().rpartition(")")
            name, state = head.partition("(")[2], tail.split()[0]
            if name not in COMPILERS or state == "Z":  # a zombie has stopped already
                continue
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if f"TMPDIR={tmp}".encode() in environ.read():
                    found.append(f"{name}[{entry}] {state}")
        except OSError:
            continue
    return found


def _as_a_terminal_job() -> None:
    """In the child before exec: SIGINT at its default, as a shell's foreground job has it.
    A test run started in the background without job control inherits SIGINT ignored,
    and `shimkit compile` rightly keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted_compile(
    tmp_path: Path, repo_root: Path, deliver: str
) -> tuple[subprocess.CompletedProcess[str], list[Path], list[str], Path]:
    """Start `shimkit compile`, wait for a compiler's scratch file, then `deliver` the
    signal. Returns the finished process, the scratch files seen at that moment, the
    compiler processes of the run still alive afterwards, and the run's TMPDIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out" / "mlp.pt2"
    out.parent.mkdir()
    env = clean_env(TMPDIR=str(tmp), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"))
    child = subprocess.Popen(
        [str(SHIMKIT), "compile", "-o", str(out), str(repo_root / "examples/models/mlp.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
        preexec_fn=_as_a_terminal_job,
    )
    seen: list[Path] = []
    deadline = time.monotonic() + 300
    while child.poll() is None and time.monotonic() < deadline and not seen:
        seen = _scratch_files(tmp)
        time.sleep(0.002)
    if deliver == "SIGINT to the group":
        os.killpg(child.pid, signal.SIGINT)
    elif deliver == "SIGTERM":
        child.send_signal(signal.SIGTERM)
    else:
        child.send_signal(signal.SIGKILL)
    stdout, stderr = child.communicate(timeout=120)
    alive = _compilers_of(tmp)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    return proc, seen, alive, tmp


@pytest.mark.slow
@pytest.mark.parametrize("deliver", ["SIGINT to the group", "SIGTERM"] * 2)
def test_interrupted_compile_leaves_nothing(tmp_path: Path, repo_root: Path, deliver: str) -> None:
    proc, seen, alive, tmp = _interrupted_compile(tmp_path, repo_root, deliver)
    # The control: a compiler was writing scratch files into the private TMPDIR.
    assert seen, f"no compiler scratch file appeared: {proc.stderr[-2000:]}"
    assert proc.returncode == 1, proc.stderr[-2000:]  # not killed by the signal
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(("shimkit: interrupted", "shimkit: terminated")), last
    assert alive == []
    # torch's own cache may stay: shimkit leaves Python's temp dir to torch, and torch puts
    # its precompiled headers under it whatever TORCHINDUCTOR_CACHE_DIR says (where the
    # signal comes after that step).
    left = sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))
    assert left == [], "compiler or staging files left"
    assert list((tmp_path / "out").iterdir()) == []  # neither the output nor a staging folder


@pytest.mark.slow
def test_negative_control_sigkill_leaves_the_scratch_files(tmp_path: Path, repo_root: Path) -> None:
    """SIGKILL cannot be caught: the same moment leaves the private TMPDIR and its scratch
    files behind, which the checks above would report."""
    proc, seen, _alive, tmp = _interrupted_compile(tmp_path, repo_root, "SIGKILL")
    try:
        assert seen and proc.returncode == -signal.SIGKILL
        assert list(tmp.glob("shimkit-compile-*")), "the private TMPDIR should be left"
    finally:
        # Its compilers were orphaned, not stopped: stop them before removing their files.
        for name in _compilers_of(tmp):
            with suppress(OSError):
                os.kill(int(name.split("[")[1].split("]")[0]), signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


_ORPHAN_SCRIPT = """
import os, subprocess, sys
from shimkit.fileio import stop_children
env = dict(os.environ, TMPDIR=sys.argv[1])
driver = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
orphan = int(driver.stdout.readline())
driver.kill()  # what subprocess.run does to its child when Ctrl-C unwinds through it
driver.wait()
print(orphan, flush=True)
stop_children(grace=2.0, carrying=f"TMPDIR={sys.argv[1]}" if sys.argv[2] == "yes" else None)
"""


def _orphan_after_stop(tmp: Path, by_tmpdir: bool) -> int:
    """In a child: a stand-in gcc driver whose child (a sleep, the 'cc1plus') carries
    TMPDIR=`tmp` is SIGKILLed, orphaning the sleep (no longer a descendant); then the
    child runs stop_children. Returns the sleep's pid."""
    proc = subprocess.run(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp), "yes" if by_tmpdir else "no"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(proc.stdout.split()[0])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_stop_children_finds_an_orphan_by_its_tmpdir(tmp_path: Path) -> None:
    assert not _alive(_orphan_after_stop(tmp_path, by_tmpdir=True))


def test_negative_control_descendants_alone_miss_the_orphan(tmp_path: Path) -> None:
    orphan = _orphan_after_stop(tmp_path, by_tmpdir=False)
    try:
        assert _alive(orphan)
    finally:
        os.kill(orphan, signal.SIGKILL)
