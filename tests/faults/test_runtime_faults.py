"""The runtime under hostile packages, kills and misuse: one line, no temp file, right results.

- A zip bomb (a blob member inflating 1000:1) is refused by `shimkit run`, `shimkit probe`
  and `shimkit.runtime.load` under the linter's limits, in small memory.
- An encrypted blob member is one line.
- Blobs are opened from an anonymous memory file: a kill at any moment, even inside the
  blob's own static initialisers during dlopen, leaves nothing in $TMPDIR. The temp-file
  fallback (SHIMKIT_BLOB_MEMFD=0) is the control: killed there, it leaves its file.
- Misuse (`model(None)`, `--repeat 0`) is one line.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import shimkit.runtime as rt
from shimkit.errors import ShimkitError
from shimkit.inputs.limits import DEFAULT_LIMITS

from tests.faults.conftest import SHIMKIT, Cli, assert_one_line_error, clean_env
from tests.runtime.blobs import BlobCase

BOMB_BYTES = 512 << 20  # what the bomb's blob member inflates to
BOMB_PEAK_RSS = 256 << 20  # refusing it must stay well below that


def _blob_member(archive: zipfile.ZipFile) -> zipfile.ZipInfo:
    return next(i for i in archive.infolist() if i.filename.endswith(".so"))


@pytest.fixture(scope="module")
def bomb(cases: dict[str, BlobCase], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP package with its blob member replaced by 512 MiB of zeros behind an ELF
    magic: about 0.5 MB on disk."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.pt2"
    zero = bytes(1 << 20)
    with zipfile.ZipFile(cases["mlp"].pt2) as src, zipfile.ZipFile(path, "w") as out:
        blob = _blob_member(src)
        for info in src.infolist():
            if info is blob:
                target = zipfile.ZipInfo(info.filename, info.date_time)
                target.compress_type = zipfile.ZIP_DEFLATED
                with out.open(target, "w", force_zip64=True) as writer:
                    writer.write(b"\x7fELF" + zero[4:])
                    for _ in range(BOMB_BYTES // len(zero) - 1):
                        writer.write(zero)
            else:
                out.writestr(info, src.read(info))
    return path


# Forks and execs its arguments and reports the child's peak RSS. A process forked from
# pytest (hundreds of MiB, libtorch loaded) would carry pytest's peak into its own: Linux
# keeps the larger of the two across exec. This launcher is small.
_LAUNCHER = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.argv[1], sys.argv[1:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)\n"
)


def _measured(argv: list[str], env: dict[str, str]) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in bytes) of one child process."""
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    rc, peak = proc.stdout.split()[-2:]
    return int(rc), proc.stderr, int(peak)


def test_bomb_negative_control_it_really_inflates(bomb: Path) -> None:
    """The member declares, and really inflates to, 512 MiB (counted in 1 MiB reads)."""
    with zipfile.ZipFile(bomb) as archive:
        info = _blob_member(archive)
        assert info.file_size == BOMB_BYTES
        assert info.file_size > DEFAULT_LIMITS.max_ratio * info.compress_size
        total = 0
        with archive.open(info) as handle:
            while chunk := handle.read(1 << 20):
                total += len(chunk)
    assert total == BOMB_BYTES
    assert bomb.stat().st_size < 2 << 20


def test_bomb_negative_control_reading_it_without_limits_is_big(bomb: Path) -> None:
    """What the runtime did before it used the linter's limits: read the member whole.
    The peak RSS measured this way is far above the bar the refusals are held to."""
    code = (
        "import sys, zipfile\n"
        "z = zipfile.ZipFile(sys.argv[1])\n"
        "data = z.read(next(n for n in z.namelist() if n.endswith('.so')))\n"
    )
    rc, stderr, peak = _measured([sys.executable, "-c", code, str(bomb)], clean_env())
    assert rc == 0, stderr
    assert peak > BOMB_BYTES


@pytest.mark.parametrize("command", ["run", "probe"])
def test_bomb_is_refused_by_the_cli_in_small_memory(
    cli: Cli, cases: dict[str, BlobCase], bomb: Path, tmp_path: Path, command: str
) -> None:
    # Warm first: a child's peak counts the compilers it waits for (a runtime library
    # built on first use), which is not what is measured here.
    assert cli(["run", str(cases["mlp"].pt2), "--zeros"]).returncode == 0
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    argv = [str(SHIMKIT), command, str(bomb)] + (["--zeros"] if command == "run" else [])
    rc, stderr, peak = _measured(argv, clean_env(TMPDIR=str(tmpdir)))
    proc = subprocess.CompletedProcess(argv, rc, "", stderr)
    assert_one_line_error(proc, str(bomb), ".wrapper.so", "zip bomb")
    assert peak < BOMB_PEAK_RSS, f"peak RSS {peak >> 20} MiB"
    assert list(tmpdir.iterdir()) == []


def test_bomb_is_refused_by_runtime_load(bomb: Path) -> None:
    with pytest.raises(ShimkitError, match=r"compression ratio \d+:1 exceeds 200:1") as info:
        rt.load(bomb)
    assert "\n" not in str(info.value) and str(bomb) in str(info.value)


def _flag_encrypted(path: Path, member: str, encrypted: bool) -> None:
    """Set or clear the 'encrypted' bit of `member` in its local and central headers."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        local = archive.getinfo(member).header_offset
    places = [local + 6]
    start = data.find(b"PK\x01\x02")
    while start != -1:
        name_len = int.from_bytes(data[start + 28 : start + 30], "little")
        if data[start + 46 : start + 46 + name_len].decode() == member:
            places.append(start + 8)
        start = data.find(b"PK\x01\x02", start + 4)
    assert len(places) == 2
    for place in places:
        flags = int.from_bytes(data[place : place + 2], "little")
        flags = flags | 1 if encrypted else flags & ~1
        data[place : place + 2] = flags.to_bytes(2, "little")
    path.write_bytes(bytes(data))


def test_encrypted_blob_member_is_one_line(
    cli: Cli, cases: dict[str, BlobCase], tmp_path: Path
) -> None:
    package = tmp_path / "locked.pt2"
    package.write_bytes(cases["mlp"].pt2.read_bytes())
    with zipfile.ZipFile(package) as archive:
        member = _blob_member(archive).filename
    _flag_encrypted(package, member, True)
    assert_one_line_error(cli(["run", str(package), "--zeros"]), member, "encrypted member")
    with pytest.raises(ShimkitError, match="encrypted member"):
        rt.load(package)
    # Control: the same bytes with the bit cleared again load and run.
    _flag_encrypted(package, member, False)
    proc = cli(["run", str(package), "--zeros"])
    assert proc.returncode == 0, proc.stderr


# --- kills -------------------------------------------------------------------------------

# A blob that stops inside its own static initialiser (where AOTInductor blobs call shims,
# during dlopen): it creates the marker file named by $FAULT_MARKER, then waits to be killed.
_SLOW_BLOB = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void wait_in_dlopen(void) {
  const char* marker = getenv("FAULT_MARKER");
  if (marker == NULL) return;
  close(open(marker, O_CREAT | O_WRONLY, 0644));
  sleep(120);
}
#define ENTRY(name) __attribute__((visibility("default"))) int name(void) { return 0; }
ENTRY(AOTInductorModelContainerCreateWithDevice)
ENTRY(AOTInductorModelContainerDelete)
ENTRY(AOTInductorModelContainerRun)
ENTRY(AOTInductorModelContainerGetNumInputs)
ENTRY(AOTInductorModelContainerGetNumOutputs)
"""


@pytest.fixture(scope="module")
def slow_blob(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("slow-blob")
    (out / "slow.c").write_text(_SLOW_BLOB)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out / "slow.so"), str(out / "slow.c")], check=True
    )
    return out / "slow.so"


@pytest.fixture
def private_tmp(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "tmp"
    directory.mkdir()
    yield directory


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"exited {proc.returncode} before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.005)


def _killed_inside_dlopen(slow_blob: Path, tmpdir: Path, memfd: str) -> list[str]:
    """`shimkit run` SIGKILLed while the blob's initialiser runs; what it left in TMPDIR."""
    marker = tmpdir.parent / "in-dlopen"
    marker.unlink(missing_ok=True)
    env = clean_env(TMPDIR=str(tmpdir), FAULT_MARKER=str(marker), SHIMKIT_BLOB_MEMFD=memfd)
    proc = subprocess.Popen(
        [str(SHIMKIT), "run", "--no-lint", str(slow_blob)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(marker, proc)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return sorted(p.name for p in tmpdir.iterdir())


def test_kill_inside_dlopen_leaves_nothing(slow_blob: Path, private_tmp: Path) -> None:
    assert _killed_inside_dlopen(slow_blob, private_tmp, "1") == []


def test_negative_control_kill_inside_dlopen_of_a_temp_file_leaves_it(
    slow_blob: Path, private_tmp: Path
) -> None:
    """The temp-file fallback keeps its file until dlopen returns: killed inside, it stays.
    (The watcher above is sharp enough to see a leftover.)"""
    left = _killed_inside_dlopen(slow_blob, private_tmp, "0")
    assert len(left) == 1 and left[0].startswith("shimkit-blob-"), left


@pytest.mark.parametrize("memfd", ["1", "0"])
def test_process_killed_after_loading_leaves_no_temp_file(
    cases: dict[str, BlobCase], private_tmp: Path, memfd: str
) -> None:
    """A host process loads a model, runs it, and is SIGKILLed while it holds it."""
    code = (
        "import os, signal, sys, numpy as np\n"
        "import shimkit.runtime as rt\n"
        "model = rt.load(sys.argv[1])\n"
        "model(np.load(sys.argv[2]))\n"
        "print('loaded', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    x = private_tmp.parent / "x.npy"
    np.save(x, cases["mlp"].inputs[0])
    env = clean_env(TMPDIR=str(private_tmp), SHIMKIT_BLOB_MEMFD=memfd)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(cases["mlp"].pt2), str(x)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.stdout.strip() == "loaded", proc.stderr
    assert proc.returncode == -signal.SIGKILL
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("memfd", ["1", "0"])
def test_cli_run_killed_while_running_leaves_no_temp_file(
    cases: dict[str, BlobCase], private_tmp: Path, memfd: str
) -> None:
    env = clean_env(TMPDIR=str(private_tmp), SHIMKIT_BLOB_MEMFD=memfd)
    proc = subprocess.Popen(
        [str(SHIMKIT), "run", str(cases["mlp"].pt2), "--zeros", "--repeat", "100000000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(3)  # long past the load: it is in the timing loop
    assert proc.poll() is None
    proc.kill()
    proc.wait()
    assert list(private_tmp.iterdir()) == []


def test_memory_files_need_no_writable_tmpdir(cases: dict[str, BlobCase], tmp_path: Path) -> None:
    """A TMPDIR that does not exist stops only the temp-file fallback (one line)."""
    missing = tmp_path / "missing"
    code = "import sys, shimkit.runtime as rt\nrt.load(sys.argv[1]).close()\nprint('ok')\n"
    argv = [sys.executable, "-c", code, str(cases["mlp"].pt2)]
    proc = subprocess.run(
        argv, env=clean_env(TMPDIR=str(missing)), capture_output=True, text=True, check=False
    )
    assert proc.stdout.strip() == "ok", proc.stderr
    # Control: the fallback needs the directory, and says so.
    run = [str(SHIMKIT), "run", str(cases["mlp"].pt2), "--zeros"]
    env = clean_env(TMPDIR=str(missing), SHIMKIT_BLOB_MEMFD="0")
    failed = subprocess.run(run, env=env, capture_output=True, text=True, check=False)
    assert_one_line_error(failed, str(missing), "set TMPDIR to a writable directory")


def test_two_blobs_loaded_at_once_each_run_their_own_code(cases: dict[str, BlobCase]) -> None:
    """Memory files are opened as /proc/self/fd/<n>, and glibc matches loaded objects by
    name: a number reused after the first blob's descriptor was closed would hand back the
    first blob. (Checked to fail when the loader's name check is taken out.)"""
    mlp = rt.load(cases["mlp"].pt2)
    topk = rt.load(cases["topk"].pt2)
    try:
        assert (mlp.num_outputs, topk.num_outputs) == (1, len(cases["topk"].expected))
        for model, case in ((mlp, cases["mlp"]), (topk, cases["topk"])):
            for got, want in zip(model(*case.inputs), case.expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        mlp.close()
        topk.close()


# --- misuse ------------------------------------------------------------------------------


def test_model_called_with_none_is_one_line(cases: dict[str, BlobCase]) -> None:
    with rt.load(cases["mlp"].pt2) as model:
        where = re.escape(str(cases["mlp"].pt2))
        with pytest.raises(
            ShimkitError, match=rf"^{where}:.*: input 0: got None, expected an array"
        ):
            model(None)
        with pytest.raises(ShimkitError, match=rf"^{where}:.*: input 0: a str is not an array of"):
            model("not numbers")
        # Control: the same model takes a real input afterwards.
        got = model(*cases["mlp"].inputs)[0]
        np.testing.assert_allclose(got, cases["mlp"].expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_run_repeat_refuses_what_is_not_a_count(
    cli: Cli, cases: dict[str, BlobCase], value: str
) -> None:
    proc = cli(["run", str(cases["mlp"].pt2), "--zeros", "--repeat", value])
    assert proc.returncode == 2, proc.stderr  # usage error, before anything is loaded
    assert "Traceback" not in proc.stderr
    assert "argument --repeat:" in proc.stderr.splitlines()[-1]


def test_run_repeat_control_a_count_is_taken(cli: Cli, cases: dict[str, BlobCase]) -> None:
    proc = cli(["run", str(cases["mlp"].pt2), "--zeros", "--repeat", "3"])
    assert proc.returncode == 0, proc.stderr
    assert "us/call over 3 calls" in proc.stdout
