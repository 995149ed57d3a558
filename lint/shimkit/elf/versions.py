"""Symbol versions: .gnu.version (one index per .dynsym entry), resolved through
.gnu.version_d (definitions) and .gnu.version_r (requirements).

The chains are walked directly with struct, bounded: every entry must lie
inside its section, every name inside the linked string table, and the walk
stops after as many steps as the section could hold, so hostile counts or
cyclic `next` links cannot make it unbounded. (pyelftools' walk trusts the
counts; tests check both agree on real files.)
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from shimkit.elf.layout import Layout, MalformedElf, read_words, string_at

VER_NDX_GLOBAL = 1
_MIN_ENTRY = 8  # smallest verdaux entry: the step budget is section size / 8


class VersionChain(NamedTuple):
    """One .gnu.version_d or .gnu.version_r section (or its DT_VERDEF/DT_VERNEED twin)."""

    offset: int
    size: int
    count: int  # entries, from sh_info or DT_VERDEFNUM/DT_VERNEEDNUM
    strtab: bytes | memoryview  # the string table its names point into
    needed: bool  # verneed (requirements) rather than verdef (definitions)


def version_names(data: bytes | memoryview, chain: VersionChain, endian: str) -> dict[int, str]:
    """Version index -> name from one verneed or verdef chain."""
    what = ".gnu.version_r" if chain.needed else ".gnu.version_d"
    off, size, count = chain.offset, chain.size, chain.count
    if off + size > len(data):
        raise MalformedElf(f"{what} extends past end of file")
    budget = max(size // _MIN_ENTRY, 1)
    if count > budget:
        raise MalformedElf(f"{what}: {count} entries cannot fit in {size} bytes")
    head = struct.Struct(endian + ("HHIII" if chain.needed else "HHHHIII"))
    aux = struct.Struct(endian + ("IHHII" if chain.needed else "II"))
    names: dict[int, str] = {}
    steps = 0
    pos = 0
    for _ in range(count):
        if pos + head.size > size:
            raise MalformedElf(f"{what}: entry at +0x{pos:x} extends past its section")
        fields = head.unpack_from(data, off + pos)
        if chain.needed:
            _ver, cnt, _file, aux_off, next_off = fields
        else:
            _ver, _flags, ndx, cnt, _hash, aux_off, next_off = fields
        apos = pos + aux_off
        for j in range(cnt if chain.needed else min(cnt, 1)):
            steps += 1
            if steps > budget:
                raise MalformedElf(f"{what}: version chain longer than its section")
            if apos + aux.size > size:
                raise MalformedElf(f"{what}: auxiliary entry at +0x{apos:x} past its section")
            afields = aux.unpack_from(data, off + apos)
            if chain.needed:
                _hash, _aflags, other, name_off, anext = afields
                names[other & 0x7FFF] = string_at(chain.strtab, name_off, f"{what}: name")
            else:
                name_off, anext = afields
                names[ndx & 0x7FFF] = string_at(chain.strtab, name_off, f"{what}: name")
            if j + 1 < cnt and anext == 0:
                break
            apos += anext
        steps += 1
        if steps > budget:
            raise MalformedElf(f"{what}: version chain longer than its section")
        if next_off == 0:
            break
        pos += next_off
    return names


def symbol_versions(
    data: bytes | memoryview,
    layout: Layout,
    versym_offset: int | None,
    count: int,
    rows: Sequence[int],
    chains: list[VersionChain],
) -> list[str | None]:
    """The version name of each symbol in `rows` (table indices), None if unversioned,
    from the .gnu.version table at `versym_offset` (`count` entries)."""
    if versym_offset is None or not rows:
        return [None] * len(rows)
    if versym_offset + 2 * count > len(data):
        raise MalformedElf(f".gnu.version at 0x{versym_offset:x} extends past end of file")
    versym = read_words(data, versym_offset, count, 2, layout.little_endian)
    names: dict[int, str] = {}
    for chain in chains:
        names.update(version_names(data, chain, layout.endian))
    if not names:
        return [None] * len(rows)
    indices = [versym[row] & 0x7FFF for row in rows]
    return [names.get(i) if i > VER_NDX_GLOBAL else None for i in indices]
