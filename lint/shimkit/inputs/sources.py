"""Turning files, directories, archives and containers into ELF images (or input errors)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from shimkit.elf.model import ElfFormatError, InputError
from shimkit.inputs.ar import ArchiveError, iter_members
from shimkit.inputs.filedata import FileChanged, read_file_data
from shimkit.inputs.kinds import kind_of, wants_embed_scan
from shimkit.inputs.limits import DEFAULT_LIMITS, Budget, Limits
from shimkit.inputs.walk import FileEntry, SkippedInput, _describe, expand

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")
    Reader = Callable[[memoryview, str], T]


class _Scanner:  # generic in T (the reader's result) for type checkers
    def __init__(self, reader: Reader[T], limits: Limits) -> None:
        self.reader = reader
        self.limits = limits

    def file(self, entry: FileEntry) -> Iterator[T | InputError]:
        path = entry.path
        data: bytes | mmap.mmap
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size == 0:
                    if entry.explicit:
                        yield InputError(path, "empty file")
                    return
                head = handle.read(8)
                if not (entry.explicit or kind_of(head) or wants_embed_scan(path)):
                    return  # met while walking and not ELF, ar or zip: skip unread
                data = read_file_data(handle, size, head)
        except OSError as exc:
            yield InputError(path, f"cannot read: {_describe(exc)}")
            return
        except FileChanged as exc:
            yield InputError(path, str(exc))
            return
        try:
            yield from self.buffer(data, path, 0, entry.explicit, Budget(self.limits))
        finally:
            if isinstance(data, mmap.mmap):
                # Not contextlib.suppress: importing contextlib costs `shimkit symbols` 1 ms.
                try:  # noqa: SIM105
                    data.close()
                except BufferError:  # a view is still referenced; the GC unmaps it later
                    pass

    def buffer(
        self, data: bytes | mmap.mmap, location: str, depth: int, explicit: bool, budget: Budget
    ) -> Iterator[T | InputError]:
        with memoryview(data) as view:
            kind = kind_of(bytes(view[:8]))
            if kind == "elf":
                yield self.elf(view, location)
            elif kind in ("ar", "thin-ar", "zip") and depth >= self.limits.max_depth:
                yield InputError(location, f"containers nested deeper than {self.limits.max_depth}")
            elif kind == "ar":
                yield from self.archive(view, location, depth, budget)
            elif kind == "thin-ar":
                yield InputError(location, "thin archive: members are separate files; lint those")
            elif kind == "zip":
                yield from self.zip(view, location, depth, budget)
            elif explicit or wants_embed_scan(location):
                yield from self.embedded(data, view, location, explicit)

    def elf(self, view: memoryview, location: str) -> T | InputError:
        try:
            return self.reader(view, location)
        except ElfFormatError as exc:
            return exc.as_input_error()

    def archive(
        self, view: memoryview, location: str, depth: int, budget: Budget
    ) -> Iterator[T | InputError]:
        try:
            for name, body in iter_members(view, self.limits.max_members):
                yield from self.buffer(bytes(body), f"{location}!{name}", depth + 1, False, budget)
        except ArchiveError as exc:
            yield InputError(location, f"bad ar archive: {exc}")

    def zip(
        self, view: memoryview, location: str, depth: int, budget: Budget
    ) -> Iterator[T | InputError]:
        # Imported on first use: zipfile costs start-up time that `shimkit symbols lib.so`
        # would pay for nothing.
        from shimkit.elf.stream import BufferStream
        from shimkit.inputs.zipc import ZIP_ERRORS, ZipMemberError, iter_zip_members

        stream = BufferStream(view)
        try:
            for item in iter_zip_members(stream, budget):
                if isinstance(item, ZipMemberError):
                    yield InputError(f"{location}!{item.member}", item.message)
                    continue
                name, body = item
                yield from self.buffer(body, f"{location}!{name}", depth + 1, False, budget)
        except ZIP_ERRORS as exc:
            yield InputError(location, f"bad zip container: {' '.join(str(exc).split())}")
        finally:
            stream.close()

    def embedded(
        self, data: bytes | mmap.mmap, view: memoryview, location: str, explicit: bool
    ) -> Iterator[T | InputError]:
        from shimkit.inputs.carve import iter_embedded

        found = False
        for offset, extent in iter_embedded(data, view, self.limits.max_embedded):
            found = True
            where = f"{location}!elf@0x{offset:x}"
            if isinstance(extent, str):
                yield InputError(where, extent)
                continue
            result = self.elf(view[offset : offset + extent], where)
            if not isinstance(result, InputError) and hasattr(result, "offset"):
                result.offset = offset  # type: ignore[attr-defined]
            yield result
        if not found and explicit:
            yield InputError(
                location, "not an ELF file, ar archive or zip container, and no ELF image inside"
            )


def scan(
    paths: Sequence[str | os.PathLike[str]],
    reader: Reader[T],
    *,
    follow_symlinks: bool = True,
    progress: Callable[[int, int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Iterator[T | InputError | SkippedInput]:
    """Every image under `paths` read with `reader`, an InputError per input that cannot
    be read, and a SkippedInput per thing deliberately not read (see inputs.walk)."""
    scanner = _Scanner(reader, limits)
    entries = list(expand(paths, follow_symlinks=follow_symlinks))
    total = len(entries)
    for done, entry in enumerate(entries, start=1):
        if isinstance(entry, (InputError, SkippedInput)):
            yield entry
        else:
            yield from scanner.file(entry)
        if progress is not None:
            progress(done, total)
