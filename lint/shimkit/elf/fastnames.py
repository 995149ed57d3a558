"""The C helper behind the names-only reader: sorted import and export names in one pass.

A wheel ships it built (`shimkit/_native/python/`, by CMake at wheel-build time). In a
checkout, `_fastnames.c` (next to this file) is compiled with gcc on first use into
`$SHIMKIT_CACHE_DIR` (else `$XDG_CACHE_HOME/shimkit`, else `~/.cache/shimkit`),
in a directory named by a hash of the source, the flags and the interpreter's
ABI, under a file lock; later processes load it after checking its size and
SHA-256 against the record the build wrote (a damaged copy is rebuilt). The pure-Python reader
(`shimkit.elf.names`) stays the reference: it is used whenever the helper is
off (`SHIMKIT_FASTNAMES=0`), cannot be built (no compiler, no Python.h, a
read-only cache; the reason is in `load_error()`, and a failed build is not
retried until the source changes), or declines a table (anything unusual:
bounds, name offsets, names that are not ASCII). Tests check that both give
the same answer.

Start-up time matters here (`shimkit symbols` is measured against `nm` as a
whole process): the load path imports only os, sys, zlib and hashlib.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from types import ModuleType

FASTNAMES_ENV = "SHIMKIT_FASTNAMES"
CACHE_ENV = "SHIMKIT_CACHE_DIR"
MODULE = "_shimkit_fastnames"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fastnames.c")
# No -Werror: a newer compiler's new warning must not cost users the helper (a test
# builds it with -Werror).
FLAGS = (
    "-O3", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wl,-z,noexecstack",
)  # fmt: skip
_FAILED = "FAILED"  # in the build directory: why the last build there failed

_STATE: dict[str, ModuleType | None] = {}
_ERROR: list[str] = []


class SortedNames:
    """Sorted names (repeats kept) as the helper returns them: one bytes object, the
    names separated by NUL, ASCII. `count` tells no names (0) from one empty name (1,
    b""); `plain` says no name needs a JSON escape. A list of str only on demand."""

    __slots__ = ("count", "data", "plain")

    def __init__(self, data: bytes, count: int, plain: bool) -> None:
        self.data = data
        self.count = count
        self.plain = plain

    def names(self) -> list[str]:
        return self.data.decode("ascii").split("\0") if self.count else []

    def unique_joined(self, sep: bytes) -> bytes:
        """The names without repeats, joined by `sep` (b"" when there are none)."""
        if not self.count:
            return b""
        module = helper()
        if module is None:  # turned off after this object was made: same answer, slower
            return sep.join(dict.fromkeys(self.data.split(b"\0")))
        return module.join_unique(self.data, sep)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"SortedNames(count={self.count}, plain={self.plain})"


def enabled() -> bool:
    """False when $SHIMKIT_FASTNAMES is 0/off/false/no."""
    return os.environ.get(FASTNAMES_ENV, "1").strip().lower() not in {"0", "off", "false", "no"}


def cache_root() -> str:
    """$SHIMKIT_CACHE_DIR, else $XDG_CACHE_HOME/shimkit, else ~/.cache/shimkit (the
    convention of shimkit.aot.cache, without importing pathlib)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "shimkit")


def _suffix() -> str:
    from importlib.machinery import EXTENSION_SUFFIXES

    return EXTENSION_SUFFIXES[0]


def build_dir() -> str:
    """Where the helper for this source, these flags and this interpreter lives."""
    import zlib

    with open(SOURCE, "rb") as handle:
        source = handle.read()
    meta = "\0".join([*FLAGS, _suffix(), sys.version]).encode()
    key = f"{zlib.crc32(source):08x}{zlib.crc32(meta):08x}"
    return os.path.join(cache_root(), f"fastnames-{key}")


def _compile(directory: str, target: str) -> None:
    """gcc the source into `target` (atomically); OSError with the reason if it fails."""
    import shutil
    import subprocess
    import sysconfig

    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise OSError("no C compiler (gcc or cc) on PATH")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise OSError(f"{include}: Python.h not found (install the Python headers)")
    tmp = os.path.join(directory, f".{MODULE}.{os.getpid()}.so")
    cmd = [compiler, *FLAGS, "-I", include, SOURCE, "-o", tmp]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        first = (proc.stderr.strip().splitlines() or ["?"])[0]
        raise OSError(f"{SOURCE}: does not compile: {first}")
    with open(tmp, "rb") as handle:
        built = handle.read()
    with open(tmp + ".sum", "w", encoding="ascii") as handle:
        handle.write(_checksum(built))
    os.replace(tmp + ".sum", target + ".sum")
    os.replace(tmp, target)


def _checksum(data: bytes) -> str:
    import hashlib

    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def _intact(target: str) -> bool:
    """True if `target` is the file its build recorded (size and SHA-256). A cached
    helper that was truncated or replaced is never loaded: mapping a truncated
    shared object kills the process with SIGBUS."""
    try:
        with open(target + ".sum", encoding="ascii") as handle:
            recorded = handle.read()
        with open(target, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return recorded == _checksum(data)


def build() -> str:
    """The helper's path: built now unless a build for this source is there already.
    OSError (with the reason) if it cannot be built; a failure is remembered next to
    the build (not retried for this source) unless the directory is not writable."""
    directory = build_dir()
    target = os.path.join(directory, MODULE + _suffix())
    if _intact(target):
        return target
    failed = os.path.join(directory, _FAILED)
    if os.path.isfile(failed):
        with open(failed, encoding="utf-8", errors="replace") as handle:
            why = handle.read().strip()
            raise OSError(f"earlier build failed ({why}); remove {directory} to retry")
    import fcntl

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _intact(target):  # built by another process while we waited
            return target
        try:
            _compile(directory, target)
        except OSError as exc:
            with open(failed, "w", encoding="utf-8") as handle:
                handle.write(f"{exc}\n")
            raise
    return target


def shipped() -> str | None:
    """The helper built with the package (a wheel), or None."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(package, "_native", "python", MODULE + _suffix())
    return path if os.path.isfile(path) else None


def _load(path: str) -> ModuleType:
    from importlib.machinery import ExtensionFileLoader, ModuleSpec

    loader = ExtensionFileLoader(MODULE, path)
    spec = ModuleSpec(MODULE, loader, origin=path)
    module = loader.create_module(spec)
    if module is None:
        raise ImportError(f"{path}: no module")
    loader.exec_module(module)
    return module  # type: ignore[no-any-return]


def helper() -> ModuleType | None:
    """The helper module (built and loaded once per process), or None: off, or it
    cannot be built or loaded (then `load_error()` says why)."""
    if not enabled():
        return None
    if MODULE in _STATE:
        return _STATE[MODULE]
    module: ModuleType | None = None
    try:
        module = _load(shipped() or build())
    except (OSError, ImportError) as exc:
        _ERROR[:] = [" ".join(str(exc).split())]
    _STATE[MODULE] = module
    return module


def load_error() -> str | None:
    """Why helper() returned None in this process (None: it did not, or it is off)."""
    return _ERROR[0] if _ERROR else None


def reset() -> None:
    """Forget this process's helper (tests: load again under another environment)."""
    _STATE.clear()
    _ERROR.clear()
