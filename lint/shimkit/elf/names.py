"""`read_names`: the names-only reader behind `shimkit symbols`, without numpy.

Importing numpy costs more than reading libtorch_cpu.so's 75k dynamic symbols,
so this reader uses only the standard library: headers through struct, the
symbol table's columns through strided slices of `array`s (st_name, st_info and
st_shndx of every entry at C speed, byte-swapped for the other endianness), and
names by splitting the string table once and mapping each st_name offset to its
piece; offsets inside a piece (names sharing a suffix) are sliced.

It makes the same checks, in the same order and with the same messages, as the
vectorized reader (`shimkit.elf.reader`): tests check that both give the same
answer (or the same error) on every fixture, on system and torch libraries, and
on fuzzed bytes. Images without section headers (.dynsym found through
PT_DYNAMIC and its hash tables) are rare: they go to the vectorized reader.

Once the headers are checked, a symbol table goes to the C helper
(`shimkit.elf.fastnames`) when it is there: selection, sort and packing in one
pass, no str per name (about 5x faster on libtorch). The Python code below is the
reference and the fallback: it reads every table the helper declines (or all of
them, without the helper), and tests check both give the same answer.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from itertools import accumulate, compress, repeat
from itertools import count as naturals
from operator import add

from shimkit.elf.elfdefs import (
    ELF_MAGIC,
    PT_DYNAMIC,
    PT_LOAD,
    SHN_XINDEX,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_NULL,
    SHT_STRTAB,
    SHT_SYMTAB,
    SYM_SIZE,
    HeaderError,
    SymbolTableError,
    e_type_name,
    guarded,
    machine_name,
    out_of_bounds_message,
)
from shimkit.elf.fastnames import SortedNames, helper
from shimkit.elf.model import ElfNames

_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_EHDR_SIZE = {1: 52, 2: 64}
_SHDR = {1: "10I", 2: "IIQQQQIIQQ"}
_SHENT = {1: 40, 2: 64}
_PHDR = {1: "8I", 2: "IIQQQQQQ"}
_PHENT = {1: 32, 2: 56}
_U64 = (1 << 64) - 1  # numpy's uint64 sums wrap: the vectorized reader's checks rely on it
_TYPECODE = {array(code).itemsize: code for code in "QLIHB"}  # bytes -> typecode
_NATIVE_LITTLE = sys.byteorder == "little"
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME = 0, 1, 5, 10, 14
# byte -> 0/1 tables for bytes.translate: non-zero; st_info with a binding other than
# STB_LOCAL (st_info >> 4 != 0); and logical not of a 0/1 byte.
_NONZERO = bytes([0] + [1] * 255)
_NOT_LOCAL = bytes([0] * 16 + [1] * 240)
_FLIP = bytes([1] + [0] * 255)


class _Section:
    """The section header fields the reader uses (plain classes: a NamedTuple's exec at
    import costs more start-up time than this whole module)."""

    __slots__ = ("entsize", "link", "name", "offset", "size", "type")

    def __init__(self, row: tuple[int, ...]) -> None:
        # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign sh_entsize
        self.name, self.type, _, _, self.offset, self.size, self.link, _, _, self.entsize = row


class _Segment:
    __slots__ = ("filesz", "offset", "type", "vaddr")

    def __init__(self, p_type: int, offset: int, vaddr: int, filesz: int) -> None:
        self.type, self.offset, self.vaddr, self.filesz = p_type, offset, vaddr, filesz


class _Layout:
    __slots__ = ("e_machine", "e_type", "elf_class", "little", "sections", "segments", "shstrndx")

    def __init__(
        self,
        ident: tuple[int, bool, int, int, int],
        sections: list[_Section],
        segments: list[_Segment],
    ) -> None:
        self.elf_class, self.little, self.e_type, self.e_machine, self.shstrndx = ident
        self.sections = sections
        self.segments = segments


def _hex(value: int) -> str:
    return f"0x{value:x}"


def _words(
    data: bytes | memoryview, offset: int, count: int, width: int, little: bool
) -> array[int]:
    """`count` unsigned integers of `width` bytes at `offset`, in host order."""
    words = array(_TYPECODE[width])
    words.frombytes(data[offset : offset + count * width])
    if little != _NATIVE_LITTLE and width > 1:
        words.byteswap()
    return words


def _layout(data: bytes | memoryview) -> _Layout:
    """shimkit.elf.header.parse_layout's checks and messages, on plain tuples."""
    size = len(data)
    if size < 16:
        raise HeaderError(f"truncated: {size} bytes is shorter than the ELF identification (16)")
    ident = bytes(data[:16])
    if ident[:4] != ELF_MAGIC:
        raise HeaderError("not an ELF file (bad magic)")
    elf_class, ei_data = ident[4], ident[5]
    if elf_class not in (1, 2):
        raise HeaderError(f"bad EI_CLASS {elf_class} (expected 1 or 2)")
    if ei_data not in (1, 2):
        raise HeaderError(f"bad EI_DATA {ei_data} (expected 1 or 2)")
    endian = "<" if ei_data == 1 else ">"
    ehdr_size = _EHDR_SIZE[elf_class]
    if size < ehdr_size:
        raise HeaderError(f"truncated: ELF header needs {ehdr_size} bytes, file has {size}")
    fields = struct.unpack_from(endian + _EHDR[elf_class], data, 16)
    e_type, e_machine, _ver, _entry, e_phoff, e_shoff = fields[:6]
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = fields[8:]
    wrap = _U64 if elf_class == 2 else -1  # 32-bit sums are taken in 64 bits: no wrap

    sections: list[_Section] = []
    if e_shoff:
        if e_shentsize != _SHENT[elf_class]:
            raise HeaderError(f"bad e_shentsize {e_shentsize} (expected {_SHENT[elf_class]})")
        if e_shoff + e_shentsize > size:
            raise HeaderError(
                f"truncated: section headers extend past end of file "
                f"({_hex(e_shoff + e_shentsize)} > {_hex(size)})"
            )
        shdr = struct.Struct(endian + _SHDR[elf_class])
        first = shdr.unpack_from(data, e_shoff)
        count = e_shnum if e_shnum else first[5]  # extended numbering: sh_size of section 0
        end = e_shoff + count * e_shentsize
        if end > size:
            raise HeaderError(
                f"truncated: section headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        sections = list(map(_Section, shdr.iter_unpack(data[e_shoff:end])))
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = first[6]
        if e_shstrndx >= count:
            raise HeaderError(f"bad e_shstrndx {e_shstrndx} (only {count} sections)")
        present = [i for i, s in enumerate(sections) if s.type not in (SHT_NOBITS, SHT_NULL)]
        if present:
            ends = [(sections[i].offset + sections[i].size) & wrap for i in present]
            last = max(ends)
            overflow = any(e < sections[i].offset for e, i in zip(ends, present, strict=True))
            if overflow or last > size:
                extents = [(i, sections[i].offset, sections[i].size) for i in present]
                raise HeaderError(str(out_of_bounds_message("section", extents, size)))

    segments: list[_Segment] = []
    if e_phnum:
        if e_phentsize != _PHENT[elf_class]:
            raise HeaderError(f"bad e_phentsize {e_phentsize} (expected {_PHENT[elf_class]})")
        end = e_phoff + e_phnum * e_phentsize
        if end > size:
            raise HeaderError(
                f"truncated: program headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        phdr = struct.Struct(endian + _PHDR[elf_class])
        rows = phdr.iter_unpack(data[e_phoff:end])
        if elf_class == 1:  # p_type p_offset p_vaddr p_paddr p_filesz ...
            segments = [_Segment(r[0], r[1], r[2], r[4]) for r in rows]
        else:  # p_type p_flags p_offset p_vaddr p_paddr p_filesz ...
            segments = [_Segment(r[0], r[2], r[3], r[5]) for r in rows]
        ends = [(s.offset + s.filesz) & wrap for s in segments]
        last = max(ends)
        if any(e < s.offset for e, s in zip(ends, segments, strict=True)) or last > size:
            extents = [(i, s.offset, s.filesz) for i, s in enumerate(segments)]
            raise HeaderError(str(out_of_bounds_message("segment", extents, size)))
    return _Layout((elf_class, ei_data == 1, e_type, e_machine, e_shstrndx), sections, segments)


def _vaddr_to_offset(layout: _Layout, addr: int) -> int | None:
    for seg in layout.segments:
        if seg.type == PT_LOAD and seg.vaddr <= addr < seg.vaddr + seg.filesz:
            return addr - seg.vaddr + seg.offset
    return None


def _dynamic_strings(data: bytes | memoryview, layout: _Layout) -> tuple[list[str], str | None]:
    """shimkit.elf.dynamic.dynamic_strings: (DT_NEEDED names, DT_SONAME)."""
    width = 4 if layout.elf_class == 1 else 8
    secs = layout.sections
    dyn = [s for s in secs if s.type == SHT_DYNAMIC]
    from_section: tuple[int, int] | None = None
    if dyn:
        off, size = dyn[0].offset, dyn[0].size
        if 0 < dyn[0].link < len(secs):
            linked = secs[dyn[0].link]
            from_section = (linked.offset, linked.size)
    else:
        segs = [s for s in layout.segments if s.type == PT_DYNAMIC]
        if not segs:
            return [], None
        off, size = segs[0].offset, segs[0].filesz
    count = min(size // (2 * width), max((len(data) - off) // (2 * width), 0))
    words = _words(data, off, 2 * count, width, layout.little)
    tags, values = words[0::2].tolist(), words[1::2].tolist()
    end = tags.index(DT_NULL) if DT_NULL in tags else count
    entries: dict[int, list[int]] = {}
    for tag, value in zip(tags[:end], values[:end], strict=True):
        entries.setdefault(tag, []).append(value)
    if DT_NEEDED not in entries and DT_SONAME not in entries:
        return [], None
    if from_section is not None:
        strtab = from_section
    else:
        addr = entries[DT_STRTAB][0] if DT_STRTAB in entries else None
        if addr is None:
            raise HeaderError("dynamic section without a mapped string table")
        start = _vaddr_to_offset(layout, addr)
        if start is None:
            raise HeaderError(f"DT_STRTAB address 0x{addr:x} is not in any PT_LOAD segment")
        strsz = entries[DT_STRSZ][0] if DT_STRSZ in entries else 0
        strtab = (start, min(strsz or 0, len(data) - start))
    base, size = strtab
    if base + size > len(data):
        raise HeaderError("dynamic string table extends past end of file")

    def text(offset: int) -> str:
        """The string at `offset`, copying a few bytes instead of the whole table (.dynstr
        holds every symbol name: megabytes in big libraries)."""
        if offset >= size:
            raise HeaderError(f"dynamic string offset 0x{offset:x} past its table")
        start, end = base + offset, base + size
        raw = bytes(data[start : min(end, start + 4096)])
        if b"\0" not in raw and start + len(raw) < end:
            raw = bytes(data[start:end])
        stop = raw.find(b"\0")
        return raw[: stop if stop >= 0 else len(raw)].decode("utf-8", "surrogateescape")

    needed = [text(v) for v in entries.get(DT_NEEDED, [])]
    sonames = [text(v) for v in entries.get(DT_SONAME, [])]
    return needed, (sonames[0] if sonames else None)


def _section_name(data: bytes | memoryview, layout: _Layout, index: int) -> str:
    """The name of section `index`; "" when the section names cannot all be read."""
    secs = layout.sections
    if layout.shstrndx == 0:
        return ""
    strsec = secs[layout.shstrndx]
    if strsec.size == 0 or max(s.name for s in secs) >= strsec.size:
        return ""
    return StringTable(data[strsec.offset : strsec.offset + strsec.size]).names([secs[index].name])[
        0
    ]


class StringTable:
    """A string table split on NUL once; names are looked up by offset.

    A string without a terminating NUL ends at the end of the table. Names are
    UTF-8 (surrogateescape for bytes that are not).
    """

    def __init__(self, table: bytes | memoryview) -> None:
        try:  # decoded straight from the file's buffer: no copy of a table of megabytes
            self.text: str | bytes = str(table, "ascii")
        except UnicodeDecodeError:
            self.text = bytes(table)
        self._pieces: list[str] | list[bytes] | None = None

    def pieces(self) -> list[str] | list[bytes]:
        if self._pieces is None:
            text = self.text
            self._pieces = text.split("\0") if isinstance(text, str) else text.split(b"\0")
        return self._pieces

    def _starts(self) -> list[int]:
        """Where each piece starts (ascending): its index plus the lengths before it."""
        starts = list(map(add, accumulate(map(len, self.pieces()), initial=0), naturals()))
        starts.pop()  # accumulate's last value is past the end
        return starts

    def selected(self, offsets: array[int], selector: bytes) -> list[str]:
        """The strings at offsets[i] for each i with selector[i] == 1, in no particular order.

        When most pieces are selected (the exports of a big library), no set of the
        selected offsets is built: the selected offsets are removed from the set of
        piece starts, and what is left (few) is cut out of the piece list.
        """
        count = selector.count(1)
        if count * 16 >= len(self.text) // 64:
            starts = self._starts()
            unwanted = set(starts)
            unwanted.difference_update(compress(offsets, selector))
            if len(starts) - len(unwanted) == count:  # distinct offsets, each starts a piece
                return self._decoded(self._all_but(starts, unwanted))
        return self.names(list(compress(offsets, selector)))

    def names(self, offsets: list[int]) -> list[str]:
        """The string at each offset, in no particular order (callers sort)."""
        found: list[str | bytes | None]
        if len(offsets) * 16 < len(self.text) // 64:  # few names (about 64 bytes each): slice
            found = list(map(self._slice, offsets))
        elif len(wanted := set(offsets)) == len(offsets):  # each offset once (the usual case)
            pieces, starts = self.pieces(), self._starts()
            unwanted = set(starts).difference(wanted)  # both walked in slot order: cache-friendly
            if len(starts) - len(unwanted) == len(wanted):  # every offset starts a piece
                found = self._all_but(starts, unwanted)
            else:  # some offsets point inside a piece (a shared tail): slice those
                found = list(compress(pieces, map(wanted.__contains__, starts)))
                found += map(self._slice, sorted(wanted.difference(starts)))
        else:  # repeated offsets (one name, several versions): one lookup per offset
            table = dict(zip(self._starts(), self.pieces(), strict=True))
            found = [table.get(o) for o in offsets]
            found = [
                self._slice(o) if p is None else p for o, p in zip(offsets, found, strict=True)
            ]
        return self._decoded(found)

    def _all_but(self, starts: list[int], unwanted: set[int]) -> list[str | bytes | None]:
        """Every piece but those starting at `unwanted` (a subset of `starts`), in no
        particular order: the piece list itself, each unwanted piece swapped with the
        last one and dropped (no copy, no pass over the kept pieces). Consumes the list."""
        pieces: list[str | bytes | None] = self.pieces()  # type: ignore[assignment]
        self._pieces = None
        for index in sorted(map(bisect_left, repeat(starts), unwanted), reverse=True):
            last = pieces.pop()  # indices above `index` are gone: `last` is kept or is `index`
            if index < len(pieces):
                pieces[index] = last
        return pieces

    def _decoded(self, found: list[str | bytes | None]) -> list[str]:
        if isinstance(self.text, str):
            return found  # type: ignore[return-value]
        return [piece.decode("utf-8", "surrogateescape") for piece in found]  # type: ignore[union-attr]

    def _slice(self, start: int) -> str | bytes:
        text = self.text
        stop = text.find("\0", start) if isinstance(text, str) else text.find(b"\0", start)
        return text[start : stop if stop >= 0 else len(text)]


def _symbols(
    data: bytes | memoryview, layout: _Layout, table: _Section, strsec: _Section
) -> tuple[list[str], list[str]] | tuple[SortedNames, SortedNames]:
    """(imports, exports) of one symbol table: unsorted lists, or sorted by the C helper
    (SortedNames); shimkit.elf.symtab's checks."""
    size = len(data)
    off, length, entsize = table.offset, table.size, table.entsize
    str_off, str_size = strsec.offset, strsec.size
    want = SYM_SIZE[layout.elf_class]
    if entsize not in (0, want):
        raise SymbolTableError(f"bad symbol table sh_entsize {entsize} (expected {want})")
    if off + length > size or str_off + str_size > size:
        raise SymbolTableError("symbol or string table extends past end of file")
    if length % want:
        raise SymbolTableError(
            f"symbol table size {length} is not a multiple of the entry size {want}"
        )
    count = length // want
    if count <= 1:
        return [], []
    fast = helper()
    if fast is not None:  # sorted already, in one C pass; None: a table it leaves to us
        found = fast.sorted_names(
            data, off, length, str_off, str_size, layout.elf_class == 2, layout.little
        )
        if found is not None:
            imports, n_imports, imports_plain, exports, n_exports, exports_plain = found
            return (
                SortedNames(imports, n_imports, imports_plain),
                SortedNames(exports, n_exports, exports_plain),
            )
    start, stop = off + want, off + length  # entry 0 is the null symbol
    table_bytes = data[start:stop]
    little = layout.little
    if layout.elf_class == 2:  # st_name:4 st_info:1 st_other:1 st_shndx:2 st_value:8 st_size:8
        st_name = _words(table_bytes, 0, (stop - start) // 4, 4, little)[0::6]
        info, shndx = 4, 6
    else:  # st_name:4 st_value:4 st_size:4 st_info:1 st_other:1 st_shndx:2
        st_name = _words(table_bytes, 0, (stop - start) // 4, 4, little)[0::4]
        info, shndx = 12, 14
    highest = max(st_name)
    if highest >= max(str_size, 1):
        raise SymbolTableError(
            f"symbol [{st_name.index(highest) + 1}] name offset 0x{highest:x} is past the end "
            f"of its string table (size 0x{str_size:x})"
        )
    # One byte per symbol, 1 or 0, from strided columns: st_shndx != SHN_UNDEF (either byte
    # of it non-zero) and binding != LOCAL; combined as big integers (C speed, any count).
    defined = _or(
        _bytes_of(table_bytes, shndx, want, _NONZERO),
        _bytes_of(table_bytes, shndx + 1, want, _NONZERO),
    )
    exported = _and(defined, _bytes_of(table_bytes, info, want, _NOT_LOCAL))
    strtab = StringTable(data[str_off : str_off + str_size])
    imports = strtab.selected(st_name, defined.translate(_FLIP))
    return list(filter(None, imports)), strtab.selected(st_name, exported)


def _bytes_of(table: bytes | memoryview, offset: int, stride: int, table_map: bytes) -> bytes:
    """Byte `offset` of every entry of `stride` bytes, mapped through `table_map`."""
    return bytes(table[offset::stride]).translate(table_map)


def _or(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(len(a), "little")


def _and(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") & int.from_bytes(b, "little")).to_bytes(len(a), "little")


def _read(data: bytes | memoryview, location: str) -> ElfNames:
    layout = _layout(data)
    e_type = e_type_name(layout.e_type)
    want = SHT_SYMTAB if e_type == "REL" else SHT_DYNSYM
    if want == SHT_DYNSYM and not layout.sections:
        # .dynsym through PT_DYNAMIC and its hash tables: the vectorized reader (rare input).
        from shimkit.elf.reader import read_elf_names_vectorized

        return read_elf_names_vectorized(data, location)
    machine = machine_name(layout.e_machine)
    needed, soname = _dynamic_strings(data, layout)
    secs = layout.sections
    tables = [i for i, s in enumerate(secs) if s.type == want]
    imports: list[str] | SortedNames = []
    exports: list[str] | SortedNames = []
    table_name: str | None = None
    count = 0
    if tables:
        sec = secs[tables[0]]
        table_name = _section_name(data, layout, tables[0]) or (
            ".symtab" if want == SHT_SYMTAB else ".dynsym"
        )
        if sec.link >= len(secs) or secs[sec.link].type != SHT_STRTAB:
            raise SymbolTableError(f"{table_name}: sh_link {sec.link} is not a string table")
        imports, exports = _symbols(data, layout, sec, secs[sec.link])
        count = max(sec.size // SYM_SIZE[layout.elf_class] - 1, 0)
    if isinstance(imports, list):
        imports.sort()
    if isinstance(exports, list):
        exports.sort()
    return ElfNames(
        location=location,
        e_type=e_type,
        machine=machine,
        elf_class=32 if layout.elf_class == 1 else 64,
        imports=imports,
        exports=exports,
        needed=needed,
        soname=soname,
        size=len(data),
        symbol_table=table_name,
        symbol_count=count,
    )


def read_names(data: bytes | memoryview, location: str) -> ElfNames:
    """Sorted import and export names of one ELF image (what `shimkit symbols` prints).

    Same answer as read_elf's imports/exports names. Raises
    ElfFormatError(location, message) if the image is malformed.
    """
    return guarded(location, lambda: _read(data, location))
