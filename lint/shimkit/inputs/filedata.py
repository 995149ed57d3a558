"""A file's bytes for the readers, without mapping the file itself.

A file that is mapped and then truncated by someone else kills the reading process with
SIGBUS the moment a page past the new end is touched: no exception, no other input
linted. So inputs are never mapped. Small files are read whole. A large ELF file is read
*sparsely* into anonymous memory of the file's size: the headers and every section the
ELF readers use (symbol and string tables, the dynamic section, version and hash tables,
notes, and whatever those link to) are read with pread; code, data and debug sections
stay untouched zero pages and cost nothing. Anything else large (archives, zip
containers, ELF files without a usable section table) is read whole into anonymous
memory. A file that shrinks, grows or is replaced while it is read raises
`FileChanged`, which the caller reports as one error line for that file.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import BinaryIO

from shimkit.inputs.kinds import ELF_MAGIC

SPARSE_FROM = 1 << 20  # files at least this large are read sparsely (ELF) or into anon memory

_NOBITS = 8
_ET_REL = 1
# Section types whose contents the ELF readers read: hash tables (5, GNU 0x6ffffff6),
# the dynamic section (6), notes (7), .dynsym (11) and the GNU version tables. The
# string tables they use come in through sh_link (and e_shstrndx). Code, data, debug
# info, relocations and unwind tables, the bulk of a large library, are never read.
_READ_TYPES = frozenset({5, 6, 7, 11, 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF})
# Relocatable objects are read through .symtab (2) and its index table (18).
_READ_TYPES_REL = _READ_TYPES | {2, 18}
_PT_DYNAMIC, _PT_INTERP, _PT_NOTE = 2, 3, 4


class FileChanged(Exception):
    """The file changed size or identity while it was read."""


def _ranges_for_elf(handle: BinaryIO, size: int) -> list[tuple[int, int]] | None:
    """File ranges the ELF readers use, or None: read the whole file."""
    ident = os.pread(handle.fileno(), 64, 0)
    if len(ident) < 52 or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        return None
    is64 = ident[4] == 2
    endian = "<" if ident[5] == 1 else ">"
    (e_type,) = struct.unpack_from(endian + "H", ident, 16)
    if is64:
        phoff, shoff = struct.unpack_from(endian + "QQ", ident, 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
            endian + "HHHHH", ident, 54
        )
        ehsize = 64
    else:
        phoff, shoff = struct.unpack_from(endian + "II", ident, 28)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
            endian + "HHHHH", ident, 42
        )
        ehsize = 52
    shdr_size = 64 if is64 else 40
    phdr_size = 56 if is64 else 32
    if shnum == 0 or shentsize < shdr_size or shoff + shnum * shentsize > size:
        return None  # no (usable) section table: the readers go through PT_DYNAMIC
    ranges = [(0, ehsize), (shoff, shnum * shentsize)]
    table = os.pread(handle.fileno(), shnum * shentsize, shoff)
    if len(table) != shnum * shentsize:
        raise FileChanged("truncated while being read")
    sections = []
    for index in range(shnum):
        base = index * shentsize
        if is64:
            sh_type, _flags, _addr, offset, length, link = struct.unpack_from(
                endian + "IQQQQI", table, base + 4
            )
        else:
            sh_type, _flags, _addr, offset, length, link = struct.unpack_from(
                endian + "IIIIII", table, base + 4
            )
        sections.append((sh_type, offset, length, link))
    read_types = _READ_TYPES_REL if e_type == _ET_REL else _READ_TYPES
    wanted = {i for i, (sh_type, *_rest) in enumerate(sections) if sh_type in read_types}
    if 0 < shstrndx < shnum:
        wanted.add(shstrndx)
    for index in list(wanted):  # the tables a wanted section links to (its strings, ...)
        link = sections[index][3]
        if 0 < link < shnum and sections[link][0] != _NOBITS:
            wanted.add(link)
    ranges += [(sections[i][1], sections[i][2]) for i in sorted(wanted)]
    if phnum and phentsize >= phdr_size and phoff + phnum * phentsize <= size:
        ranges.append((phoff, phnum * phentsize))
        headers = os.pread(handle.fileno(), phnum * phentsize, phoff)
        for index in range(len(headers) // phentsize):
            base = index * phentsize
            if is64:
                p_type, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from(
                    endian + "IIQQQQ", headers, base
                )
            else:
                p_type, offset, _vaddr, _paddr, filesz = struct.unpack_from(
                    endian + "IIIII", headers, base
                )
            if p_type in (_PT_DYNAMIC, _PT_INTERP, _PT_NOTE):
                ranges.append((offset, filesz))
    return ranges


def _fill(handle: BinaryIO, buffer: mmap.mmap, size: int, ranges: list[tuple[int, int]]) -> None:
    view = memoryview(buffer)
    try:
        for start, length in ranges:
            end = min(start + length, size)  # the readers bounds-check what lies past the end
            while start < end:
                got = os.preadv(handle.fileno(), [view[start:end]], start)
                if got == 0:
                    raise FileChanged(f"truncated while being read (expected {size} bytes)")
                start += got
    finally:
        view.release()


def read_file_data(handle: BinaryIO, size: int, head: bytes) -> bytes | mmap.mmap:
    """The bytes of the open file `handle` (`size` from fstat, `head` its first bytes).

    Returns bytes (small files) or anonymous memory of `size` bytes (close it when done).
    Raises FileChanged when the file is modified underneath, OSError when it cannot be read.
    """
    before = os.fstat(handle.fileno())
    if size < SPARSE_FROM:
        data = head + handle.read()
        if len(data) != size:
            raise FileChanged(f"changed size while being read ({size} -> {len(data)} bytes)")
    else:
        ranges = _ranges_for_elf(handle, size) if head.startswith(ELF_MAGIC) else None
        data = mmap.mmap(-1, size)
        try:
            _fill(handle, data, size, [(0, size)] if ranges is None else ranges)
        except BaseException:
            data.close()
            raise
    after = os.fstat(handle.fileno())
    if (after.st_size, after.st_mtime_ns, after.st_ino) != (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    ):
        if isinstance(data, mmap.mmap):
            data.close()
        raise FileChanged(
            f"changed while being read ({before.st_size} -> {after.st_size} bytes); "
            "lint it again once it is complete"
        )
    return data
