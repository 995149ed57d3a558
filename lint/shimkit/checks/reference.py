"""Reference libraries (libtorch) and their export sets, cached on disk.

The collision rule (SK003) compares an artifact's exports with the exports of
reference libraries. By default these are torch's own libraries, found in the
installed wheel's `lib/` through `importlib.util.find_spec("torch")` (torch is
never imported). Reading libtorch_cpu.so's 74k names takes ~0.1-0.5 s, so each
export set is cached under `$SHIMKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/shimkit`,
else `~/.cache/shimkit`. The cache key is a BLAKE2b hash of the file's first
and last 64 KiB, its size and its mtime: a rebuilt or replaced library never
hits a stale entry, and checking the key costs two small reads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import mmap
import os
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import numpy as np

from shimkit.cache import cache_root
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically
from shimkit.inputs.filedata import FileChanged, read_file_data

CACHE_VERSION = "reference-v1"
_EDGE = 64 * 1024
_TORCH_LIB_PATTERNS = ("libtorch*.so*", "libc10*.so*")


def torch_library_dir() -> Path | None:
    """The installed torch wheel's lib/ directory, without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        lib = Path(location) / "lib"
        if lib.is_dir():
            return lib
    return None


def default_reference_paths() -> list[Path]:
    """torch's runtime libraries (libtorch*, libc10*; test libraries excluded)."""
    lib = torch_library_dir()
    if lib is None:
        return []
    found = {
        path
        for pattern in _TORCH_LIB_PATTERNS
        for path in lib.glob(pattern)
        if path.is_file() and "_test" not in path.name
    }
    return sorted(found)


def fingerprint(path: Path) -> str:
    """The cache key of `path`: hash of head, tail, size and mtime."""
    try:
        stat = path.stat()
        with path.open("rb") as handle:
            head = handle.read(_EDGE)
            if stat.st_size > 2 * _EDGE:
                handle.seek(stat.st_size - _EDGE)
            tail = handle.read(_EDGE)
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read reference library: {exc.strerror}") from None
    except FileChanged as exc:
        raise ShimkitError(f"{path}: reference library {exc}") from None
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{stat.st_size}:{stat.st_mtime_ns}:".encode())
    digest.update(head)
    digest.update(tail)
    return digest.hexdigest()


def name_hashes(names: Iterable[str]) -> np.ndarray:
    """64-bit BLAKE2b hashes of `names`, sorted and unique (uint64)."""
    return np.unique(_hash_list(list(names)))


class HashedReference:
    """A Reference whose export sets are sorted 64-bit name hashes.

    Loading 74k names as strings costs ~25 ms; loading their hashes ~1 ms. A
    false match needs a 64-bit hash collision between a reference export and
    one of the few hundred exports of an artifact (odds ~1e-14 per artifact).
    """

    def __init__(self, sources: dict[str, np.ndarray]) -> None:
        self._sources = dict(sources)

    @property
    def libraries(self) -> tuple[str, ...]:
        return tuple(sorted(self._sources))

    @staticmethod
    def _member(table: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        if table.size == 0 or hashes.size == 0:
            return np.zeros(hashes.shape, dtype=bool)
        index = np.minimum(np.searchsorted(table, hashes), table.size - 1)
        return table[index] == hashes

    def intersection(self, names: Iterable[str]) -> set[str]:
        ordered = sorted(set(names))
        if not ordered:
            return set()
        hashes = _hash_list(ordered)
        hit = np.zeros(hashes.shape, dtype=bool)
        for table in self._sources.values():
            hit |= self._member(table, hashes)
        return {name for name, found in zip(ordered, hit.tolist(), strict=True) if found}

    def owners(self, name: str) -> list[str]:
        hashes = _hash_list([name])
        return sorted(lib for lib, t in self._sources.items() if self._member(t, hashes)[0])


def _hash_list(names: list[str]) -> np.ndarray:
    blake = hashlib.blake2b
    return np.array(
        [
            int.from_bytes(
                blake(n.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "little"
            )
            for n in names
        ],
        dtype=np.uint64,
    )


def _read_exports(path: Path) -> list[str]:
    from shimkit.elf import ElfFormatError, read_elf  # only needed on a cache miss

    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise ShimkitError(f"{path}: reference library is empty")
            data = read_file_data(handle, size, handle.read(8))
            try:
                image = read_elf(data, str(path))
            finally:
                if isinstance(data, mmap.mmap):
                    with suppress(BufferError):  # a view still refers to it: the GC frees it
                        data.close()
    except ElfFormatError as exc:
        raise ShimkitError(f"{path}: not a usable reference library: {exc.message}") from None
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read reference library: {exc.strerror}") from None
    return sorted({s.name for s in image.exports})


def _load_cached(entry: Path) -> np.ndarray | None:
    try:
        table = np.load(entry, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if table.dtype != np.uint64 or table.ndim != 1:
        return None  # not one of ours: rebuild it
    return table


def _store(entry: Path, table: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(entry, buffer.getvalue())
    except (OSError, ShimkitError):
        return  # an unwritable cache only costs speed


def load_export_hashes(path: Path, *, use_cache: bool = True) -> np.ndarray:
    """The hashed dynamic export names of `path`, from the cache when warm."""
    if not path.is_file():
        raise ShimkitError(f"{path}: reference library does not exist")
    entry = cache_root() / CACHE_VERSION / f"{fingerprint(path)}.npy"
    if use_cache:
        cached = _load_cached(entry)
        if cached is not None:
            return cached
    table = name_hashes(_read_exports(path))
    if use_cache:
        _store(entry, table)
    return table


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; directories become their shared objects (`*.so*`)."""
    result: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            result.extend(sorted(p for p in path.glob("*.so*") if p.is_file()))
        else:
            result.append(path)
    return result


def load_reference(
    paths: Iterable[str | os.PathLike[str]] | None = None, *, use_cache: bool = True
) -> HashedReference | None:
    """A Reference over `paths` (default: torch's libraries); None if there are none."""
    files = default_reference_paths() if paths is None else expand(paths)
    if not files:
        return None
    sources: dict[str, np.ndarray] = {}
    for path in files:
        key = path.name if path.name not in sources else str(path)
        sources[key] = load_export_hashes(path, use_cache=use_cache)
    return HashedReference(sources)
