"""Writing files the user keeps, so that no fault, race or kill loses or half-writes one.

Every command that writes a file the user keeps goes through this module:

- `write_atomically` writes a whole file: temp file in the target's directory, fsync, rename
  over the target, fsync of the directory. A reader sees the old file or the new one, never
  a truncated one; a kill at any moment leaves the old file intact. The target keeps its
  mode, and a symlink is written through (its target is replaced, the link stays).
- `staged_output` is the same for outputs written by someone else (AOTInductor, zipfile):
  the block writes a temp path inside a private staging folder beside the target.
- `private_tempdir` gives a run its own TMPDIR (e.g. for the compilers that `compile`
  starts), removed on every exit path.

Temp files and staging folders are named by `shimkit.staging` (the owner's pid in the
name). SIGKILL cannot be caught, so a killed run may leave one: directory walks and the
gate skip such leftovers and say so, and the next write beside the same target removes
those whose owner is gone. The CLI turns SIGTERM and SIGHUP into `Terminated`, so the
`finally` blocks here run on them as on Ctrl-C.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from shimkit.errors import ShimkitError, Terminated
from shimkit.staging import owner_alive, parse_leftover, staging_prefix


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _unwritable(path: Path, exc: OSError) -> ShimkitError:
    where = path.parent if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else path
    hint = {
        errno.EACCES: f"; make {where} writable or write elsewhere",
        errno.EPERM: f"; make {where} writable or write elsewhere",
        errno.EROFS: "; the file system is read-only: write elsewhere",
        errno.ENOSPC: "; free some space and run again (the old file is intact)",
        errno.ENOENT: f"; create {path.parent} first",
        errno.ENOTDIR: f"; {path.parent} is not a directory",
    }.get(exc.errno or 0, "")
    return ShimkitError(f"{path}: cannot write: {_describe(exc)}{hint}")


def _umask() -> int:
    # Linux reports it without changing it (os.umask would, racing other threads).
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_target(path: Path) -> Path:
    """Where writing `path` lands: a symlink (chain) is followed to its final target."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _mode_for(target: Path, mode: int | None) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return mode if mode is not None else 0o666 & ~_umask()


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # some file systems refuse; the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(
    path: str | os.PathLike[str], data: bytes | str, *, mode: int | None = None
) -> Path:
    """Replace `path` with `data` (str is written as UTF-8) all at once; returns the file written.

    An existing file keeps its mode (else `mode`, else 0666 minus the umask); a symlink
    is followed and its target replaced. On any error the old file is untouched and no
    temp file is left; the error is a one-line ShimkitError naming `path`.
    """
    path = Path(path)
    target = write_target(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    final_mode = _mode_for(target, mode)
    sweep_leftovers(target.parent, target.name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=staging_prefix(target.name), dir=target.parent)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fchmod(handle.fileno(), final_mode)
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            raise _unwritable(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def check_output(path: Path, overwrite: bool) -> None:
    """Refuse an existing output unless `overwrite`; refuse a directory always."""
    if path.is_dir():
        raise ShimkitError(f"{path}: output path is a directory")
    if path.exists() and not overwrite:
        raise ShimkitError(f"{path}: output exists; pass --force to replace it")
    if not path.parent.is_dir():
        raise ShimkitError(f"{path}: output directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ShimkitError(
            f"{path}: cannot write into {path.parent}: permission denied; "
            "make it writable or write elsewhere"
        )


def sweep_leftovers(directory: Path, target_name: str) -> list[Path]:
    """Remove staging leftovers for `target_name` in `directory` whose owner is gone."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        parsed = parse_leftover(entry.name)
        if parsed is None or parsed[0] != target_name:
            continue
        pid = parsed[1]
        if pid == os.getpid() or owner_alive(pid):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


@contextmanager
def staging_dir(beside: Path) -> Iterator[Path]:
    """A private folder beside `beside` (same file system), removed on every exit path."""
    sweep_leftovers(beside.parent, beside.name)
    try:
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix(beside.name), dir=beside.parent))
    except OSError as exc:
        raise _unwritable(beside, exc) from None
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged_output(path: Path, *, mode: int | None = None) -> Iterator[Path]:
    """Yield a temp path with the same file name, in a staging folder beside `path`.

    When the block succeeds the temp file replaces `path` atomically, with the mode of
    the file it replaces (else `mode`, else 0666 minus the umask; a symlink is written
    through); on any failure, Ctrl-C or SIGTERM included, nothing is left behind. The
    file name is kept because a .pt2's root folder is named after it.
    """
    target = write_target(path)
    final_mode = _mode_for(target, mode)
    with staging_dir(target) as staging:
        temp = staging / target.name
        yield temp
        if not temp.is_file():
            raise ShimkitError(f"{path}: nothing was written")
        try:
            os.chmod(temp, final_mode)
            with open(temp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(temp, target)
        except OSError as exc:
            raise _unwritable(path, exc) from None
        _fsync_directory(target.parent)


@contextmanager
def private_tempdir(label: str) -> Iterator[Path]:
    """A fresh TMPDIR for the child processes started while the block runs.

    Compilers started inside (gcc's ccXXXX.s) write their scratch files there; it is
    removed on every exit path, Ctrl-C and SIGTERM included. Python's own temp dir is
    left alone (pinned first): torch keeps its compile cache under it.
    """
    tempfile.gettempdir()  # computed and cached now, from the unchanged environment
    try:
        directory = Path(tempfile.mkdtemp(prefix=f"shimkit-{label}-"))
    except OSError as exc:
        raise ShimkitError(
            f"{tempfile.gettempdir()}: cannot create a temp directory: {_describe(exc)}; "
            "set TMPDIR to a writable directory"
        ) from None
    saved_env = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(directory)
    try:
        yield directory
    except (KeyboardInterrupt, Terminated):
        # Interrupted: the compilers we started must not outlive us or write on
        # into the folder removed below. (Not on other errors: in a library
        # caller's process, torch's compile workers are still wanted.)
        stop_children(carrying=f"TMPDIR={directory}")
        raise
    finally:
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(directory, ignore_errors=True)


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process in /proc."""
    table: dict[int, tuple[int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            table[int(entry)] = (int(fields[1]), fields[0].decode("ascii", "replace"))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _descendants(table: dict[int, tuple[int, str]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _state) in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        kids = children.get(frontier.pop(), [])
        found += kids
        frontier += kids
    return found


def _carrying(entry: str) -> list[int]:
    """Processes whose environment holds `entry` (NAME=value) exactly."""
    wanted = b"\0" + entry.encode() + b"\0"
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if wanted in b"\0" + environ.read() + b"\0":
                    found.append(int(name))
        except OSError:
            continue
    return found


def _gone(pid: int) -> bool:
    try:  # our own children are reaped; the others have to exit (or be zombies)
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def stop_children(grace: float = 2.0, carrying: str | None = None) -> None:
    """Stop every descendant process of ours (the compilers and their drivers), and every
    process whose environment holds `carrying` (NAME=value), wherever it hangs now.

    The processes are frozen first (SIGSTOP, rescanned until no new one shows): a gcc
    driver told to stop while its cc1plus is running would otherwise die first and
    orphan the cc1plus, which then writes on into a folder we remove. Orphans are why
    `carrying` exists: Python's subprocess.run SIGKILLs its child (a gcc driver) when
    Ctrl-C unwinds through it, before we get here, and the driver's cc1plus is then
    init's child, found only by the private TMPDIR it inherited. Then every frozen
    process gets SIGTERM and SIGCONT; what is still there after `grace` s gets SIGKILL,
    and the call returns once they are gone (at most a few seconds more).
    """
    frozen: list[int] = []
    quiet_scans = 0
    while True:
        found = _descendants(_process_table(), os.getpid())
        if carrying is not None:
            found += _carrying(carrying)
        fresh = [p for p in dict.fromkeys(found) if p not in frozen and p != os.getpid()]
        if not fresh:
            # A process caught between fork and exec may not show its environment for a
            # moment: done only after two scans in a row find nothing new.
            quiet_scans += 1
            if quiet_scans == 2:
                break
            time.sleep(0.01)
            continue
        quiet_scans = 0
        for pid in fresh:
            with suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)
    for pid in frozen:
        with suppress(OSError):
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    pending = frozen
    while pending and time.monotonic() < deadline:
        pending = [pid for pid in pending if not _gone(pid)]
        if pending:
            time.sleep(0.01)
    for pid in pending:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # A SIGKILLed process is not gone at once (on a loaded machine it may still run for a
    # moment, writing into the folder the caller removes next): wait until each is, up to
    # a few seconds (_gone reaps our own children).
    deadline = time.monotonic() + 5.0
    while pending and time.monotonic() < deadline:
        pending = [pid for pid in pending if not _gone(pid)]
        if pending:
            time.sleep(0.01)
