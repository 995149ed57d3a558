"""Symbol versions: .gnu.version (one index per .dynsym entry), resolved through
.gnu.version_d (definitions) and .gnu.version_r (requirements).

The chains are walked directly with struct, bounded: every entry must lie
inside its section, every name inside the linked string table, and the walk
stops after as many steps as the section could hold, so hostile counts or
cyclic `next` links cannot make it unbounded. (pyelftools' walk trusts the
counts and costs ~2 ms per file in struct setup; tests check both agree.)
"""

from __future__ import annotations

import struct

import numpy as np

from shimkit.elf.elfdefs import VersionError

VER_NDX_GLOBAL = 1
_MIN_ENTRY = 8  # smallest verdaux entry: the step budget is section size / 8


def _cstring(strtab: bytes, offset: int, what: str) -> str:
    if offset >= len(strtab):
        raise VersionError(f"{what}: name offset 0x{offset:x} past its string table")
    end = strtab.find(b"\0", offset)
    return strtab[offset : end if end >= 0 else len(strtab)].decode("utf-8", "surrogateescape")


def version_names(
    data: bytes | memoryview,
    section: tuple[int, int, int],
    strtab: bytes,
    *,
    needed: bool,
    endian: str,
) -> dict[int, str]:
    """Version index -> name from a verneed (`needed`) or verdef section = (offset, size, count)."""
    what = ".gnu.version_r" if needed else ".gnu.version_d"
    off, size, count = section
    if off + size > len(data):
        raise VersionError(f"{what} extends past end of file")
    budget = max(size // _MIN_ENTRY, 1)
    if count > budget:
        raise VersionError(f"{what}: {count} entries cannot fit in {size} bytes")
    head = struct.Struct(endian + ("HHIII" if needed else "HHHHIII"))
    aux = struct.Struct(endian + ("IHHII" if needed else "II"))
    names: dict[int, str] = {}
    steps = 0
    pos = 0
    for _ in range(count):
        if pos + head.size > size:
            raise VersionError(f"{what}: entry at +0x{pos:x} extends past its section")
        fields = head.unpack_from(data, off + pos)
        if needed:
            _ver, cnt, _file, aux_off, next_off = fields
        else:
            _ver, _flags, ndx, cnt, _hash, aux_off, next_off = fields
        apos = pos + aux_off
        for j in range(cnt if needed else min(cnt, 1)):
            steps += 1
            if steps > budget:
                raise VersionError(f"{what}: version chain longer than its section")
            if apos + aux.size > size:
                raise VersionError(f"{what}: auxiliary entry at +0x{apos:x} past its section")
            afields = aux.unpack_from(data, off + apos)
            if needed:
                _hash, _aflags, other, name_off, anext = afields
                names[other & 0x7FFF] = _cstring(strtab, name_off, what)
            else:
                name_off, anext = afields
                names[ndx & 0x7FFF] = _cstring(strtab, name_off, what)
            if j + 1 < cnt and anext == 0:
                break
            apos += anext
        steps += 1
        if steps > budget:
            raise VersionError(f"{what}: version chain longer than its section")
        if next_off == 0:
            break
        pos += next_off
    return names


def resolve_versions(
    versym: np.ndarray, rows: np.ndarray, names: dict[int, str]
) -> list[str | None]:
    """The version name of each symbol row (`rows` = table indices), None if unversioned."""
    if not names:
        return [None] * rows.size
    ndx = (versym[rows] & 0x7FFF).astype(np.int64)
    table: list[str | None] = [None] * (max(int(ndx.max()) if ndx.size else 0, max(names)) + 1)
    for key, value in names.items():
        if key > VER_NDX_GLOBAL:
            table[key] = value
    return [table[i] for i in ndx.tolist()]
