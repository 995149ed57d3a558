"""`read_elf`: one ELF image (bytes, memoryview or mmap) -> ElfImage.

Headers, sections and segments are bounds-checked and viewed with numpy
(`shimkit.elf.header`), the bulk symbol table goes through the vectorized
reader in `shimkit.elf.symtab`, dynamic entries and versions are walked with
bounded struct code. pyelftools is the reference: tests check every answer
against pyelftools' own parse on every fixture and on system libraries. It
is not on the hot path because building its construct structs costs ~2 ms per
file, more than the whole read of a blob. Any malformation becomes an
ElfFormatError with a one-line message: hostile input never escapes as a
traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from shimkit.elf.dynamic import dynamic_strings, dynamic_symbol_tables
from shimkit.elf.elfdefs import e_type_name, guarded
from shimkit.elf.header import (
    PF_X,
    PT_GNU_STACK,
    SHF_EXECINSTR,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_STRTAB,
    SHT_SYMTAB,
    ElfLayout,
    machine_name,
    parse_layout,
)
from shimkit.elf.image import ElfImage, Symbol
from shimkit.elf.model import ElfNames
from shimkit.elf.symtab import (
    BINDING_NAMES,
    SYM_SIZE,
    TYPE_NAMES,
    RawSymbols,
    SymbolTableError,
    decode_names,
    read_symbol_table,
)
from shimkit.elf.versions import VersionError, resolve_versions, version_names

_LOCAL = 0


def _section_names(data: bytes | memoryview, layout: ElfLayout) -> list[str]:
    secs = layout.sections
    if secs.size == 0 or layout.shstrndx == 0:
        return [""] * secs.size
    strtab = secs[layout.shstrndx]
    off, size = int(strtab["sh_offset"]), int(strtab["sh_size"])
    names = secs["sh_name"]
    if size == 0 or int(names.max()) >= size:
        return [""] * secs.size  # unnamed sections: still readable by type
    return decode_names(bytes(data[off : off + size]), names)


def _exec_stack(layout: ElfLayout, e_type: str, section_names: list[str]) -> bool | None:
    if e_type in ("DYN", "EXEC"):
        stack = layout.segments[layout.segments["p_type"] == PT_GNU_STACK]
        if stack.size == 0:
            return True  # the loader assumes an executable stack
        return bool(int(stack["p_flags"][0]) & PF_X)
    if e_type == "REL":
        for i, name in enumerate(section_names):
            if name == ".note.GNU-stack":
                return bool(int(layout.sections["sh_flags"][i]) & SHF_EXECINSTR)
        return True
    return None


# (offset, size, entry count, linked string table, is verneed) of one version chain
_VersionSource = tuple[int, int, int, bytes, bool]


def _version_sources(data: bytes | memoryview, layout: ElfLayout) -> list[_VersionSource]:
    secs = layout.sections
    sources: list[_VersionSource] = []
    for sh_type, needed in ((SHT_GNU_VERDEF, False), (SHT_GNU_VERNEED, True)):
        for i in layout.sections_of_type(sh_type):
            sec = secs[i]
            link = int(sec["sh_link"])
            if not 0 < link < secs.size:
                raise VersionError(f"version section [{i}]: sh_link {link} is not a section")
            strsec = secs[link]
            str_off, str_size = int(strsec["sh_offset"]), int(strsec["sh_size"])
            strtab = bytes(data[str_off : str_off + str_size])
            sources.append(
                (int(sec["sh_offset"]), int(sec["sh_size"]), int(sec["sh_info"]), strtab, needed)
            )
    return sources


def _versions(
    data: bytes | memoryview,
    layout: ElfLayout,
    versym_off: int | None,
    count: int,
    rows: np.ndarray,
    sources: list[_VersionSource],
) -> list[str | None]:
    """Version names of `rows` from .gnu.version at `versym_off` (`count` entries)."""
    if versym_off is None or rows.size == 0:
        return [None] * rows.size
    if versym_off + 2 * count > len(data):
        raise VersionError(f".gnu.version at 0x{versym_off:x} extends past end of file")
    versym = np.frombuffer(data, dtype=layout.endian + "u2", count=count, offset=versym_off)
    names: dict[int, str] = {}
    for off, size, entries, strtab, needed in sources:
        names.update(
            version_names(data, (off, size, entries), strtab, needed=needed, endian=layout.endian)
        )
    return resolve_versions(versym, rows, names)


def _section_versym(layout: ElfLayout, table_index: int, count: int) -> int | None:
    secs = layout.sections
    for i in layout.sections_of_type(SHT_GNU_VERSYM):
        if int(secs["sh_link"][i]) == table_index:
            if int(secs["sh_size"][i]) < 2 * count:
                raise VersionError(
                    f".gnu.version has {int(secs['sh_size'][i]) // 2} entries for {count} symbols"
                )
            return int(secs["sh_offset"][i])
    return None


def _dynamic_fallback(
    data: bytes | memoryview,
    layout: ElfLayout,
    prefixes: Sequence[str] | None,
    with_versions: bool,
) -> tuple[RawSymbols, int, list[str | None]] | None:
    """The dynamic symbol table through PT_DYNAMIC (no section headers)."""
    tables = dynamic_symbol_tables(data, layout)
    if tables is None:
        return None
    entsize = SYM_SIZE[layout.elf_class]
    total = tables.count
    if total * entsize > len(data) - tables.symtab:
        raise SymbolTableError(f"{total} dynamic symbols cannot fit in the file")
    raw = read_symbol_table(
        data,
        elf_class=layout.elf_class,
        endian=layout.endian,
        table=(tables.symtab, total * entsize, entsize),
        strtab=tables.strtab,
        prefixes=prefixes,
    )
    versions: list[str | None] = [None] * len(raw.names)
    if with_versions:
        str_off, str_size = tables.strtab
        strtab = bytes(data[str_off : str_off + str_size])
        sources: list[_VersionSource] = []
        for where, needed in ((tables.verdef, False), (tables.verneed, True)):
            if where is not None:
                sources.append((where[0], len(data) - where[0], where[1], strtab, needed))
        versions = _versions(data, layout, tables.versym, total, raw.index, sources)
    return raw, max(total - 1, 0), versions


@dataclass
class _Parsed:
    """Everything `_parse` found, with symbol columns not yet turned into objects."""

    layout: ElfLayout
    e_type: str
    machine: str
    needed: list[str]
    soname: str | None
    exec_stack: bool | None
    warnings: list[str]
    table_name: str | None
    count: int
    names: list[str]
    versions: list[str | None]
    binds: np.ndarray
    types: np.ndarray
    import_rows: np.ndarray  # row numbers into names/versions/binds/types
    export_rows: np.ndarray


def _parse(
    data: bytes | memoryview, prefixes: Sequence[str] | None, *, with_versions: bool = True
) -> _Parsed:
    """Parse an image. The names-only path passes with_versions=False."""
    layout = parse_layout(data)
    e_type = e_type_name(layout.e_type)
    machine = machine_name(layout.e_machine)
    needed, soname = dynamic_strings(data, layout)
    section_names = _section_names(data, layout)
    want = SHT_SYMTAB if e_type == "REL" else SHT_DYNSYM
    tables = layout.sections_of_type(want)
    warnings: list[str] = []
    table_name: str | None = None
    count = 0
    raw = RawSymbols.empty()
    versions: list[str | None] = []
    if tables:
        t = tables[0]
        sec = layout.sections[t]
        table_name = section_names[t] or (".symtab" if want == SHT_SYMTAB else ".dynsym")
        link = int(sec["sh_link"])
        if link >= layout.sections.size or int(layout.sections["sh_type"][link]) != SHT_STRTAB:
            raise SymbolTableError(f"{table_name}: sh_link {link} is not a string table")
        strsec = layout.sections[link]
        raw = read_symbol_table(
            data,
            elf_class=layout.elf_class,
            endian=layout.endian,
            table=(int(sec["sh_offset"]), int(sec["sh_size"]), int(sec["sh_entsize"])),
            strtab=(int(strsec["sh_offset"]), int(strsec["sh_size"])),
            prefixes=prefixes,
        )
        count = max(int(sec["sh_size"]) // SYM_SIZE[layout.elf_class] - 1, 0)
        versions = (
            _versions(
                data,
                layout,
                _section_versym(layout, t, count + 1),
                count + 1,
                raw.index,
                _version_sources(data, layout),
            )
            if want == SHT_DYNSYM and with_versions
            else [None] * len(raw.names)
        )
    elif want == SHT_DYNSYM and layout.sections.size == 0:
        found = _dynamic_fallback(data, layout, prefixes, with_versions)
        if found is not None:
            raw, count, versions = found
            table_name = ".dynsym"
            warnings.append("no section headers: .dynsym read through PT_DYNAMIC")
    named = np.fromiter(map(bool, raw.names), dtype=bool, count=len(raw.names))
    return _Parsed(
        layout=layout,
        e_type=e_type,
        machine=machine,
        needed=needed,
        soname=soname,
        exec_stack=_exec_stack(layout, e_type, section_names),
        warnings=warnings,
        table_name=table_name,
        count=count,
        names=raw.names,
        versions=versions,
        binds=raw.bind,
        types=raw.type,
        import_rows=np.flatnonzero(~raw.defined & named),
        export_rows=np.flatnonzero(raw.defined & (raw.bind != _LOCAL)),
    )


def _sorted_rows(p: _Parsed, rows: np.ndarray) -> list[int]:
    """Row order by (name, version); versions only break ties between equal names (rare)."""
    names, versions = p.names, p.versions
    order = rows.tolist()
    order.sort(key=names.__getitem__)
    ordered = [names[i] for i in order]
    ties = [k for k in range(1, len(ordered)) if ordered[k] == ordered[k - 1]]
    for k in ties:  # runs of equal names: order each run by version (ties are rare)
        start = k - 1
        while start > 0 and ordered[start - 1] == ordered[k]:
            start -= 1
        end = k + 1
        while end < len(ordered) and ordered[end] == ordered[k]:
            end += 1
        order[start:end] = sorted(order[start:end], key=lambda i: versions[i] or "")
    return order


_new = object.__new__
# Fields are set through the slot descriptors: half the cost of the frozen dataclass __init__
# (which goes through object.__setattr__ per field), which matters at 75k symbols.
_SET_NAME, _SET_VERSION, _SET_BINDING, _SET_TYPE, _SET_DEFINED = (
    Symbol.__dict__[f].__set__ for f in ("name", "version", "binding", "type", "defined")
)


def _symbol(name: str, version: str | None, binding: str, sym_type: str, defined: bool) -> Symbol:
    sym = _new(Symbol)
    _SET_NAME(sym, name)
    _SET_VERSION(sym, version)
    _SET_BINDING(sym, binding)
    _SET_TYPE(sym, sym_type)
    _SET_DEFINED(sym, defined)
    return sym


def _sorted_names(names: list[str], rows: np.ndarray) -> list[str]:
    picked = (
        [names[i] for i in rows.tolist()]
        if rows.size < 2
        else list(itemgetter(*rows.tolist())(names))
    )
    picked.sort()
    return picked


def _symbols(p: _Parsed, rows: np.ndarray, defined: bool) -> list[Symbol]:
    order = _sorted_rows(p, rows)
    names, versions = p.names, p.versions
    binds = p.binds.tolist()
    types = p.types.tolist()
    return [
        _symbol(names[i], versions[i], BINDING_NAMES[binds[i]], TYPE_NAMES[types[i]], defined)
        for i in order
    ]


def _image(p: _Parsed, location: str, size: int, prefixes: Sequence[str] | None) -> ElfImage:
    return ElfImage(
        location=location,
        elf_class=32 if p.layout.elf_class == 1 else 64,
        little_endian=p.layout.little_endian,
        e_type=p.e_type,
        machine=p.machine,
        imports=_symbols(p, p.import_rows, False),
        exports=_symbols(p, p.export_rows, True),
        needed=p.needed,
        soname=p.soname,
        exec_stack=p.exec_stack,
        size=size,
        symbol_table=p.table_name,
        symbol_count=p.count,
        name_prefixes=tuple(prefixes) if prefixes is not None else None,
        warnings=p.warnings,
    )


def _names(p: _Parsed, location: str, size: int) -> ElfNames:
    names = p.names
    return ElfNames(
        location=location,
        e_type=p.e_type,
        machine=p.machine,
        elf_class=32 if p.layout.elf_class == 1 else 64,
        imports=_sorted_names(names, p.import_rows),
        exports=_sorted_names(names, p.export_rows),
        needed=p.needed,
        soname=p.soname,
        size=size,
        symbol_table=p.table_name,
        symbol_count=p.count,
        warnings=p.warnings,
    )


def read_elf(
    data: bytes | memoryview,
    location: str,
    *,
    name_prefixes: Sequence[str] | None = None,
) -> ElfImage:
    """Read one ELF image. Raises ElfFormatError(location, message) if it is malformed.

    With `name_prefixes`, imports/exports keep only names starting with one of
    them (decided before decoding: fast on huge tables); `symbol_count` still
    counts the whole table.
    """
    size = len(data)
    return guarded(
        location, lambda: _image(_parse(data, name_prefixes), location, size, name_prefixes)
    )


def read_elf_names_vectorized(data: bytes | memoryview, location: str) -> ElfNames:
    """Like read_elf, but only sorted symbol names: no Symbol objects. `shimkit symbols`
    uses `shimkit.elf.names.read_names` (no numpy import; tests check both agree); this
    one reads images without section headers for it."""
    size = len(data)
    return guarded(
        location, lambda: _names(_parse(data, None, with_versions=False), location, size)
    )
