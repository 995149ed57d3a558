"""The dynamic section: NEEDED/SONAME strings, and the dynamic symbol table as the
loader finds it (through DT_SYMTAB/DT_HASH/DT_GNU_HASH) when section headers
are missing. The loader binds symbols without section headers, so an image
stripped of them must still be linted, not skipped.

Every address is mapped through PT_LOAD and every table is bounds-checked.
"""

from __future__ import annotations

from typing import NamedTuple

from shimkit.elf.layout import (
    PT_DYNAMIC,
    SHT_DYNAMIC,
    SYM_SIZE,
    Layout,
    MalformedElf,
    read_words,
    string_at,
)

DT_NULL = 0
DT_NEEDED = 1
DT_HASH = 4
DT_STRTAB = 5
DT_SYMTAB = 6
DT_STRSZ = 10
DT_SONAME = 14
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_VERDEF = 0x6FFFFFFC
DT_VERDEFNUM = 0x6FFFFFFD
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF
# Tags whose value is the address of a table: the next one above DT_SYMTAB bounds .dynsym.
_TABLE_TAGS = (
    # PLTGOT HASH STRTAB RELA REL JMPREL INIT_ARRAY FINI_ARRAY PREINIT_ARRAY RELR
    3, 4, 5, 7, 17, 23, 25, 26, 32, 36,
    DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERNEED,
)  # fmt: skip

Entries = dict[int, list[int]]  # tag -> values, in file order


class Dynamic(NamedTuple):
    """The dynamic section's entries, and the string table its section header links."""

    entries: Entries
    linked_strtab: tuple[int, int] | None  # (offset, size)

    def first(self, tag: int) -> int | None:
        values = self.entries.get(tag)
        return values[0] if values else None


def read_dynamic(data: bytes | memoryview, layout: Layout) -> Dynamic:
    """Entries up to DT_NULL, from the SHT_DYNAMIC section, or from PT_DYNAMIC without
    section headers."""
    width = 4 if layout.elf_class == 1 else 8
    linked: tuple[int, int] | None = None
    dyn_sections = layout.sections_of_type(SHT_DYNAMIC)
    if dyn_sections:
        section = layout.sections[dyn_sections[0]]
        off, size = section.offset, section.size
        if 0 < section.link < len(layout.sections):
            strtab = layout.sections[section.link]
            linked = (strtab.offset, strtab.size)
    else:
        segments = [s for s in layout.segments if s.type == PT_DYNAMIC]
        if not segments:
            return Dynamic({}, None)
        off, size = segments[0].offset, segments[0].filesz
    count = min(size // (2 * width), max((len(data) - off) // (2 * width), 0))
    words = read_words(data, off, 2 * count, width, layout.little_endian)
    tags, values = words[0::2].tolist(), words[1::2].tolist()
    end = tags.index(DT_NULL) if DT_NULL in tags else count
    entries: Entries = {}
    for tag, value in zip(tags[:end], values[:end], strict=True):
        entries.setdefault(tag, []).append(value)
    return Dynamic(entries, linked)


def _mapped(layout: Layout, dynamic: Dynamic, tag: int, what: str) -> int | None:
    """The file offset of the address in entry `tag` (None if the entry is absent)."""
    addr = dynamic.first(tag)
    if addr is None:
        return None
    offset = layout.vaddr_to_offset(addr)
    if offset is None:
        raise MalformedElf(f"{what} address 0x{addr:x} is not in any PT_LOAD segment")
    return offset


def dynamic_string_table(
    data: bytes | memoryview, layout: Layout, dynamic: Dynamic
) -> tuple[int, int] | None:
    """(offset, size) of the dynamic string table: the section header's link, else DT_STRTAB."""
    if dynamic.linked_strtab is not None:
        strtab = dynamic.linked_strtab
    else:
        start = _mapped(layout, dynamic, DT_STRTAB, "DT_STRTAB")
        if start is None:
            return None
        strtab = (start, min(dynamic.first(DT_STRSZ) or 0, len(data) - start))
    if strtab[0] + strtab[1] > len(data):
        raise MalformedElf("dynamic string table extends past end of file")
    return strtab


def needed_and_soname(
    data: bytes | memoryview, layout: Layout, dynamic: Dynamic
) -> tuple[list[str], str | None]:
    """(DT_NEEDED names, DT_SONAME)."""
    entries = dynamic.entries
    if DT_NEEDED not in entries and DT_SONAME not in entries:
        return [], None
    strtab = dynamic_string_table(data, layout, dynamic)
    if strtab is None:
        raise MalformedElf("dynamic section without a mapped string table")
    table = data[strtab[0] : strtab[0] + strtab[1]]
    what = "dynamic string"
    needed = [string_at(table, v, what) for v in entries.get(DT_NEEDED, [])]
    sonames = [string_at(table, v, what) for v in entries.get(DT_SONAME, [])]
    return needed, (sonames[0] if sonames else None)


class DynamicTables(NamedTuple):
    """Where the loader finds the dynamic symbol table and its companions."""

    symtab: int  # file offset of DT_SYMTAB
    count: int  # entries, null symbol included
    strtab: tuple[int, int]  # (offset, size)
    versym: int | None
    verdef: tuple[int, int] | None  # (offset, count)
    verneed: tuple[int, int] | None


def _u32(data: bytes | memoryview, layout: Layout, offset: int, count: int) -> list[int]:
    if offset < 0 or offset + 4 * count > len(data):
        raise MalformedElf(f"hash table at 0x{offset:x} extends past end of file")
    return read_words(data, offset, count, 4, layout.little_endian).tolist()


def _gnu_hash_count(data: bytes | memoryview, layout: Layout, gnu: int) -> int:
    """Symbols covered by DT_GNU_HASH: a lower bound (undefined symbols before symoffset
    are not hashed, and a linker may leave symoffset low when nothing is exported)."""
    nbuckets, symoffset, bloom_size, _shift = _u32(data, layout, gnu, 4)
    word = 4 if layout.elf_class == 1 else 8
    buckets_off = gnu + 16 + bloom_size * word
    last = max(_u32(data, layout, buckets_off, nbuckets), default=0)
    if last < symoffset:
        return symoffset
    # The last bucket's chain runs from symbol `last` to the first entry with bit 0 set.
    chain_off = buckets_off + 4 * nbuckets + 4 * (last - symoffset)
    available = (len(data) - chain_off) // 4
    if available <= 0:
        raise MalformedElf("GNU hash chain extends past end of file")
    chain = read_words(data, chain_off, available, 4, layout.little_endian)
    end = next((step for step, value in enumerate(chain) if value & 1), None)
    if end is None:
        raise MalformedElf("GNU hash chain never ends")
    return last + end + 1


def _gap_count(data: bytes | memoryview, layout: Layout, dynamic: Dynamic, strsz: int) -> int:
    """Entries between DT_SYMTAB and the next table the dynamic section points at, cut at the
    first entry that cannot be a symbol (name past the string table, unknown binding)."""
    symtab_addr = dynamic.first(DT_SYMTAB) or 0
    above = [v for t in _TABLE_TAGS for v in dynamic.entries.get(t, []) if v > symtab_addr]
    start = layout.vaddr_to_offset(symtab_addr)
    if not above or start is None:
        return 0
    entsize = SYM_SIZE[layout.elf_class]
    count = min((min(above) - symtab_addr) // entsize, (len(data) - start) // entsize)
    if count <= 0:
        return 0
    words = read_words(data, start, count * entsize // 4, 4, layout.little_endian)
    names = words[0 :: entsize // 4]
    info_at = 4 if layout.elf_class == 2 else 12
    infos = bytes(data[start + info_at : start + count * entsize : entsize])
    for index in range(1, count):  # entry 0 is the null symbol
        bind = infos[index] >> 4
        if names[index] >= max(strsz, 1) or (bind > 2 and bind != 10):
            return index
    return count


def dynamic_symbol_tables(
    data: bytes | memoryview, layout: Layout, dynamic: Dynamic
) -> DynamicTables | None:
    """The dynamic symbol table through PT_DYNAMIC, or None if the image has none."""
    symtab = _mapped(layout, dynamic, DT_SYMTAB, "DT_SYMTAB")
    if symtab is None:
        return None
    strtab = dynamic_string_table(data, layout, dynamic)
    if strtab is None:
        raise MalformedElf("DT_SYMTAB without a mapped DT_STRTAB")
    hash_off = _mapped(layout, dynamic, DT_HASH, "DT_HASH")
    if hash_off is not None:
        count = _u32(data, layout, hash_off, 2)[1]  # nchain: exact
    else:
        gnu = _mapped(layout, dynamic, DT_GNU_HASH, "DT_GNU_HASH")
        if gnu is None:
            raise MalformedElf(
                "no section headers and no DT_HASH/DT_GNU_HASH: symbol count unknown"
            )
        count = max(
            _gnu_hash_count(data, layout, gnu), _gap_count(data, layout, dynamic, strtab[1])
        )
    verdef = _mapped(layout, dynamic, DT_VERDEF, "DT_VERDEF")
    verneed = _mapped(layout, dynamic, DT_VERNEED, "DT_VERNEED")
    return DynamicTables(
        symtab=symtab,
        count=count,
        strtab=strtab,
        versym=_mapped(layout, dynamic, DT_VERSYM, "DT_VERSYM"),
        verdef=(verdef, dynamic.first(DT_VERDEFNUM) or 0) if verdef is not None else None,
        verneed=(verneed, dynamic.first(DT_VERNEEDNUM) or 0) if verneed is not None else None,
    )
