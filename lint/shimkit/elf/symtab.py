"""Symbol tables (.dynsym, .symtab): columns read at C speed, names decoded once.

The table's st_name, st_info and st_shndx columns are strided slices of
`array`s over the file's bytes (no Python per symbol). A symbol is an import
when it is undefined and named, an export when it is defined and not
STB_LOCAL. Names come from the string table through `StringTable`.

`sorted_names` (the names-only view behind `shimkit symbols`) hands the
selection, sort and str creation to the compiled `shimkit.elf._symnames`
when it was built (see docs/development.md); this module's Python is the
reference for it and the path for everything it declines (names that are not
ASCII) or when it is not built (`SHIMKIT_ELF_ACCEL=0` turns it off). Tests
check both give the same answer.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from itertools import accumulate
from types import ModuleType
from typing import NamedTuple

from shimkit.elf.layout import SYM_SIZE, MalformedElf, read_words

try:
    from shimkit.elf import _symnames as _accelerator
except ImportError:  # not built (a source checkout without `pip install`): Python only
    _accelerator = None

ACCEL_ENV = "SHIMKIT_ELF_ACCEL"
BINDINGS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "GNU_UNIQUE"}
TYPES = {
    0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS",
    10: "IFUNC",
}  # fmt: skip
BINDING_NAMES = tuple(BINDINGS.get(i, f"BIND_{i}") for i in range(16))
TYPE_NAMES = tuple(TYPES.get(i, f"TYPE_{i}") for i in range(16))
STB_LOCAL = 0


def accelerator() -> ModuleType | None:
    """The compiled names module, or None (not built, or $SHIMKIT_ELF_ACCEL is 0/off)."""
    off = os.environ.get(ACCEL_ENV, "1").strip().lower() in {"0", "off", "false", "no"}
    return None if off else _accelerator


class StringTable:
    """A string table; names are looked up by offset.

    A string without a terminating NUL ends at the end of the table. Names are
    UTF-8 (surrogateescape for bytes that are not).
    """

    def __init__(self, table: bytes | memoryview) -> None:
        self.raw = bytes(table)

    def name(self, offset: int) -> str:
        end = self.raw.find(b"\0", offset)
        return self.raw[offset : end if end >= 0 else None].decode("utf-8", "surrogateescape")

    def names(self, offsets: Sequence[int]) -> list[str]:
        """The string at each offset (every offset < the table's size)."""
        raw = self.raw
        pieces: dict[int, str] = {}
        if len(offsets) * 64 >= len(raw):
            # Many names for the table's size: split it once and find each name by the
            # piece that starts at its offset.
            if raw.isascii():  # one decode; characters are bytes
                texts = raw.decode("ascii").split("\0")
                lengths = map(len, texts)
            else:
                encoded = raw.split(b"\0")
                texts = [piece.decode("utf-8", "surrogateescape") for piece in encoded]
                lengths = map(len, encoded)
            starts = accumulate((n + 1 for n in lengths), initial=0)
            pieces = dict(zip(starts, texts, strict=False))
        # The rest is sliced (once per offset): offsets inside a piece (the linker shares
        # tails: "foo" inside "barfoo"), or all of them when few. Far more bytes of names
        # than the table holds (many offsets inside one long name) is a hostile file.
        budget = 8 * len(raw) + (1 << 20)
        found: list[str] = []
        for offset in offsets:
            name = pieces.get(offset)
            if name is None:
                name = pieces[offset] = self.name(offset)
                budget -= len(name)
                if budget < 0:
                    raise MalformedElf(
                        f"symbol names overlap in their string table far more than a linker "
                        f"makes them ({len(offsets)} names, table of {len(raw)} bytes)"
                    )
            found.append(name)
        return found


class TableRange(NamedTuple):
    """Where a symbol table and its string table lie in the file."""

    offset: int
    size: int
    entsize: int  # sh_entsize (0: not given)
    str_offset: int
    str_size: int


def entry_count(data: bytes | memoryview, elf_class: int, where: TableRange) -> int:
    """The table's entries, null symbol included, once its ranges are checked."""
    want = SYM_SIZE[elf_class]
    if where.entsize not in (0, want):
        raise MalformedElf(f"bad symbol table sh_entsize {where.entsize} (expected {want})")
    if where.offset + where.size > len(data) or where.str_offset + where.str_size > len(data):
        raise MalformedElf("symbol or string table extends past end of file")
    if where.size % want:
        raise MalformedElf(
            f"symbol table size {where.size} is not a multiple of the entry size {want}"
        )
    return where.size // want


class SymbolTable(NamedTuple):
    """The columns of one symbol table; index i is table entry i (0: the null symbol)."""

    st_name: array[int]
    st_info: bytes
    st_shndx: array[int]  # the file's byte order: only compared with 0 (SHN_UNDEF)
    strtab: StringTable

    def import_rows(self) -> list[int]:
        """Undefined, named entries."""
        raw, size = self.strtab.raw, len(self.strtab.raw)
        names, shndx = self.st_name, self.st_shndx
        return [
            i for i in range(1, len(names)) if not shndx[i] and names[i] < size and raw[names[i]]
        ]

    def export_rows(self) -> list[int]:
        """Defined entries with a binding other than STB_LOCAL."""
        info, shndx = self.st_info, self.st_shndx
        return [i for i in range(1, len(info)) if shndx[i] and info[i] >> 4 != STB_LOCAL]

    def names(self, rows: Sequence[int]) -> list[str]:
        return self.strtab.names([self.st_name[i] for i in rows])

    def keep_prefixed(self, rows: list[int], prefixes: Sequence[str]) -> list[int]:
        """The rows whose name starts with one of `prefixes`, decided without decoding."""
        raw, names = self.strtab.raw, self.st_name
        wanted = tuple(p.encode("utf-8") for p in prefixes)
        return [i for i in rows if any(raw.startswith(p, names[i]) for p in wanted)]


def read_symbol_table(
    data: bytes | memoryview, elf_class: int, little: bool, where: TableRange
) -> SymbolTable:
    """The symbol table at `where`, checked against `data` and its string table."""
    count = entry_count(data, elf_class, where)
    entry = SYM_SIZE[elf_class]
    raw = data[where.offset : where.offset + where.size]
    st_name = read_words(raw, 0, count * entry // 4, 4, little)[:: entry // 4]
    if count > 1:
        highest = max(st_name[1:])
        if highest >= max(where.str_size, 1):
            raise MalformedElf(
                f"symbol [{st_name.index(highest, 1)}] name offset 0x{highest:x} is past the end "
                f"of its string table (size 0x{where.str_size:x})"
            )
    info_at, shndx_at = (4, 6) if elf_class == 2 else (12, 14)
    shndx = array("H")
    shndx.frombytes(raw)
    return SymbolTable(
        st_name=st_name,
        st_info=bytes(raw[info_at::entry]),
        st_shndx=shndx[shndx_at // 2 :: entry // 2],
        strtab=StringTable(data[where.str_offset : where.str_offset + where.str_size]),
    )


def sorted_names(
    data: bytes | memoryview, elf_class: int, little: bool, where: TableRange
) -> tuple[list[str], list[str]]:
    """Sorted import and export names of the symbol table at `where`, without repeats."""
    entry_count(data, elf_class, where)
    compiled = accelerator()
    if compiled is not None:
        found = compiled.sorted_names(
            data, where.offset, where.size, where.str_offset, where.str_size, elf_class == 2, little
        )
        if found is not None:  # None: a table it leaves to Python (see _symnames.c)
            return found  # type: ignore[no-any-return]
    symbols = read_symbol_table(data, elf_class, little, where)
    imports = set(symbols.names(symbols.import_rows()))
    exports = set(symbols.names(symbols.export_rows()))
    return sorted(imports), sorted(exports)
