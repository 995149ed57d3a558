"""The dynamic section: NEEDED/SONAME strings, and the dynamic symbol table as the
loader finds it (through DT_SYMTAB/DT_HASH/DT_GNU_HASH) when section headers
are missing. The loader binds symbols without section headers, so an image
stripped of them must still be linted, not skipped.

Every address is mapped through PT_LOAD and every table is bounds-checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shimkit.elf.header import PT_DYNAMIC, PT_LOAD, SHT_DYNAMIC, ElfLayout, HeaderError

DT_NULL = 0
DT_NEEDED = 1
DT_HASH = 4
DT_STRTAB = 5
DT_SYMTAB = 6
DT_STRSZ = 10
DT_SYMENT = 11
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
    0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE,  # GNU_HASH VERSYM VERDEF VERNEED
)  # fmt: skip


def vaddr_to_offset(layout: ElfLayout, addr: int) -> int | None:
    """File offset of a virtual address inside a PT_LOAD segment's file image, else None."""
    for seg in layout.segments[layout.segments["p_type"] == PT_LOAD]:
        start, size = int(seg["p_vaddr"]), int(seg["p_filesz"])
        if start <= addr < start + size:
            return addr - start + int(seg["p_offset"])
    return None


def dynamic_entries(
    data: bytes | memoryview, layout: ElfLayout
) -> tuple[dict[int, list[int]], tuple[int, int] | None]:
    """(tag -> values in order, string table (offset, size) named by the section header, if any).

    Read from the SHT_DYNAMIC section, or from PT_DYNAMIC without section headers;
    entries stop at DT_NULL.
    """
    word = layout.endian + ("u4" if layout.elf_class == 1 else "u8")
    entry = 8 if layout.elf_class == 1 else 16
    dyn_secs = layout.sections_of_type(SHT_DYNAMIC)
    strtab: tuple[int, int] | None = None
    if dyn_secs:
        sec = layout.sections[dyn_secs[0]]
        off, size = int(sec["sh_offset"]), int(sec["sh_size"])
        link = int(sec["sh_link"])
        if 0 < link < layout.sections.size:
            s = layout.sections[link]
            strtab = (int(s["sh_offset"]), int(s["sh_size"]))
    else:
        segs = layout.segments[layout.segments["p_type"] == PT_DYNAMIC]
        if segs.size == 0:
            return {}, None
        off, size = int(segs[0]["p_offset"]), int(segs[0]["p_filesz"])
    count = min(size // entry, max((len(data) - off) // entry, 0))
    pairs = np.frombuffer(data, dtype=word, count=2 * count, offset=off).reshape(count, 2)
    tags = pairs[:, 0].tolist()
    end = tags.index(DT_NULL) if DT_NULL in tags else count
    entries: dict[int, list[int]] = {}
    for tag, value in zip(tags[:end], pairs[:end, 1].tolist(), strict=True):
        entries.setdefault(tag, []).append(value)
    return entries, strtab


def _first(entries: dict[int, list[int]], tag: int) -> int | None:
    values = entries.get(tag)
    return values[0] if values else None


def _mapped(layout: ElfLayout, entries: dict[int, list[int]], tag: int, what: str) -> int | None:
    addr = _first(entries, tag)
    if addr is None:
        return None
    offset = vaddr_to_offset(layout, addr)
    if offset is None:
        raise HeaderError(f"{what} address 0x{addr:x} is not in any PT_LOAD segment")
    return offset


def dynamic_string_table(
    data: bytes | memoryview,
    layout: ElfLayout,
    entries: dict[int, list[int]],
    from_section: tuple[int, int] | None,
) -> tuple[int, int] | None:
    if from_section is not None:
        strtab = from_section
    else:
        start = _mapped(layout, entries, DT_STRTAB, "DT_STRTAB")
        if start is None:
            return None
        strtab = (start, min(_first(entries, DT_STRSZ) or 0, len(data) - start))
    if strtab[0] + strtab[1] > len(data):
        raise HeaderError("dynamic string table extends past end of file")
    return strtab


def dynamic_strings(data: bytes | memoryview, layout: ElfLayout) -> tuple[list[str], str | None]:
    """(DT_NEEDED names, DT_SONAME); tests check them against pyelftools."""
    entries, from_section = dynamic_entries(data, layout)
    if DT_NEEDED not in entries and DT_SONAME not in entries:
        return [], None
    strtab = dynamic_string_table(data, layout, entries, from_section)
    if strtab is None:
        raise HeaderError("dynamic section without a mapped string table")
    raw = bytes(data[strtab[0] : strtab[0] + strtab[1]])

    def text(offset: int) -> str:
        if offset >= len(raw):
            raise HeaderError(f"dynamic string offset 0x{offset:x} past its table")
        stop = raw.find(b"\0", offset)
        return raw[offset : stop if stop >= 0 else len(raw)].decode("utf-8", "surrogateescape")

    needed = [text(v) for v in entries.get(DT_NEEDED, [])]
    sonames = [text(v) for v in entries.get(DT_SONAME, [])]
    return needed, (sonames[0] if sonames else None)


@dataclass(frozen=True)
class DynamicTables:
    """Where the loader finds the dynamic symbol table and its companions."""

    symtab: int  # file offset of DT_SYMTAB
    count: int  # entries, null symbol included
    strtab: tuple[int, int]  # (offset, size)
    versym: int | None
    verdef: tuple[int, int] | None  # (offset, count)
    verneed: tuple[int, int] | None


def _u32(data: bytes | memoryview, endian: str, offset: int, count: int) -> np.ndarray:
    if offset < 0 or offset + 4 * count > len(data):
        raise HeaderError(f"hash table at 0x{offset:x} extends past end of file")
    return np.frombuffer(data, dtype=endian + "u4", count=count, offset=offset)


def _gnu_hash_count(data: bytes | memoryview, layout: ElfLayout, gnu: int) -> int:
    """Symbols covered by DT_GNU_HASH: a lower bound (undefined symbols before symoffset
    are not hashed, and a linker may leave symoffset low when nothing is exported)."""
    endian = layout.endian
    nbuckets, symoffset, bloom_size, _shift = _u32(data, endian, gnu, 4).tolist()
    word = 4 if layout.elf_class == 1 else 8
    buckets_off = gnu + 16 + bloom_size * word
    buckets = _u32(data, endian, buckets_off, nbuckets)
    last = int(buckets.max()) if nbuckets else 0
    if last < symoffset:
        return symoffset
    chains_off = buckets_off + 4 * nbuckets
    available = (len(data) - chains_off) // 4 - (last - symoffset)
    if available <= 0:
        raise HeaderError("GNU hash chain extends past end of file")
    chain = _u32(data, endian, chains_off + 4 * (last - symoffset), available)
    ends = np.flatnonzero(chain & 1)
    if ends.size == 0:
        raise HeaderError("GNU hash chain never ends")
    return last + int(ends[0]) + 1


def _gap_count(
    data: bytes | memoryview, layout: ElfLayout, entries: dict[int, list[int]], strsz: int
) -> int:
    """Entries between DT_SYMTAB and the next table the dynamic section points at, cut at the
    first entry that cannot be a symbol (name past the string table, unknown binding)."""
    symtab_addr = _first(entries, DT_SYMTAB) or 0
    above = [v for t in _TABLE_TAGS for v in entries.get(t, []) if v > symtab_addr]
    if not above:
        return 0
    entsize = 16 if layout.elf_class == 1 else 24
    start = vaddr_to_offset(layout, symtab_addr)
    if start is None:
        return 0
    count = min((min(above) - symtab_addr) // entsize, (len(data) - start) // entsize)
    if count <= 0:
        return 0
    from shimkit.elf.symtab import sym_dtype  # local: symtab imports nothing from here

    syms = np.frombuffer(
        data, dtype=sym_dtype(layout.elf_class, layout.endian), count=count, offset=start
    )
    bind = syms["st_info"] >> 4
    bad = (syms["st_name"] >= max(strsz, 1)) | ((bind > 2) & (bind != 10))
    bad[0] = False  # the null symbol
    first_bad = np.flatnonzero(bad)
    return int(first_bad[0]) if first_bad.size else count


def _symbol_count(
    data: bytes | memoryview, layout: ElfLayout, entries: dict[int, list[int]], strsz: int
) -> int:
    hash_off = _mapped(layout, entries, DT_HASH, "DT_HASH")
    if hash_off is not None:
        return int(_u32(data, layout.endian, hash_off, 2)[1])  # nchain: exact
    gnu = _mapped(layout, entries, DT_GNU_HASH, "DT_GNU_HASH")
    if gnu is None:
        raise HeaderError("no section headers and no DT_HASH/DT_GNU_HASH: symbol count unknown")
    return max(_gnu_hash_count(data, layout, gnu), _gap_count(data, layout, entries, strsz))


def dynamic_symbol_tables(data: bytes | memoryview, layout: ElfLayout) -> DynamicTables | None:
    """The dynamic symbol table through PT_DYNAMIC, or None if the image has none."""
    entries, from_section = dynamic_entries(data, layout)
    symtab = _mapped(layout, entries, DT_SYMTAB, "DT_SYMTAB")
    if symtab is None:
        return None
    strtab = dynamic_string_table(data, layout, entries, from_section)
    if strtab is None:
        raise HeaderError("DT_SYMTAB without a mapped DT_STRTAB")
    verdef = _mapped(layout, entries, DT_VERDEF, "DT_VERDEF")
    verneed = _mapped(layout, entries, DT_VERNEED, "DT_VERNEED")
    return DynamicTables(
        symtab=symtab,
        count=_symbol_count(data, layout, entries, strtab[1]),
        strtab=strtab,
        versym=_mapped(layout, entries, DT_VERSYM, "DT_VERSYM"),
        verdef=(verdef, _first(entries, DT_VERDEFNUM) or 0) if verdef is not None else None,
        verneed=(verneed, _first(entries, DT_VERNEEDNUM) or 0) if verneed is not None else None,
    )
