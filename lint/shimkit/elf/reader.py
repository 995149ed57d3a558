"""`read_elf` and `read_elf_names`: one ELF image (bytes, memoryview or mmap) -> what the
linter needs.

The headers are bounds-checked first (`shimkit.elf.layout`); then the dynamic
section (`dynamic`), the symbol table (`symtab`: .dynsym, or .symtab for
object files, or .dynsym through PT_DYNAMIC when section headers are gone) and
its versions (`versions`). pyelftools is the reference: tests check every
answer against its own parse on every fixture, on system libraries and on
torch's. Any malformation becomes an ElfFormatError with a one-line message:
hostile input never escapes as a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from shimkit.elf.dynamic import (
    Dynamic,
    dynamic_symbol_tables,
    needed_and_soname,
    read_dynamic,
)
from shimkit.elf.layout import (
    PF_X,
    PT_GNU_STACK,
    SHF_EXECINSTR,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_STRTAB,
    SHT_SYMTAB,
    SYM_SIZE,
    Layout,
    MalformedElf,
    e_type_name,
    guarded,
    machine_name,
    parse_layout,
)
from shimkit.elf.model import ElfImage, ElfNames, Symbol
from shimkit.elf.symtab import (
    BINDING_NAMES,
    TYPE_NAMES,
    StringTable,
    SymbolTable,
    TableRange,
    entry_count,
    read_symbol_table,
    sorted_names,
)
from shimkit.elf.versions import VersionChain, symbol_versions


class _Table(NamedTuple):
    """The symbol table the linter reads, where it is, and where its versions are."""

    name: str  # ".dynsym" | ".symtab" (or the section's own name)
    where: TableRange
    versym: int | None  # file offset of .gnu.version
    chains: list[VersionChain]
    warnings: list[str]


class _Parsed(NamedTuple):
    layout: Layout
    e_type: str
    needed: list[str]
    soname: str | None
    section_names: list[str]
    table: _Table | None

    def symbol_count(self, data: bytes | memoryview) -> int:
        """Entries of the symbol table, null symbol excluded (0 without a table)."""
        if self.table is None:
            return 0
        return max(entry_count(data, self.layout.elf_class, self.table.where) - 1, 0)


def _section_names(data: bytes | memoryview, layout: Layout) -> list[str]:
    sections = layout.sections
    if not sections or layout.shstrndx == 0:
        return [""] * len(sections)
    strtab = sections[layout.shstrndx]
    if strtab.size == 0 or max(s.name for s in sections) >= strtab.size:
        return [""] * len(sections)  # unnamed sections: still readable by type
    table = StringTable(data[strtab.offset : strtab.offset + strtab.size])
    return table.names([s.name for s in sections])


def _version_chains(data: bytes | memoryview, layout: Layout) -> list[VersionChain]:
    chains: list[VersionChain] = []
    for sh_type, needed in ((SHT_GNU_VERDEF, False), (SHT_GNU_VERNEED, True)):
        for i in layout.sections_of_type(sh_type):
            section = layout.sections[i]
            if not 0 < section.link < len(layout.sections):
                raise MalformedElf(
                    f"version section [{i}]: sh_link {section.link} is not a section"
                )
            linked = layout.sections[section.link]
            strtab = data[linked.offset : linked.offset + linked.size]
            chains.append(VersionChain(section.offset, section.size, section.info, strtab, needed))
    return chains


def _versym(layout: Layout, index: int, entries: int) -> int | None:
    """The file offset of the .gnu.version section linked to symbol table `index`."""
    for i in layout.sections_of_type(SHT_GNU_VERSYM):
        versym = layout.sections[i]
        if versym.link == index:
            if versym.size < 2 * entries:
                raise MalformedElf(
                    f".gnu.version has {versym.size // 2} entries for {entries} symbols"
                )
            return versym.offset
    return None


def _section_table(
    data: bytes | memoryview, layout: Layout, index: int, name: str, with_versions: bool
) -> _Table:
    section = layout.sections[index]
    link = section.link
    if link >= len(layout.sections) or layout.sections[link].type != SHT_STRTAB:
        raise MalformedElf(f"{name}: sh_link {link} is not a string table")
    linked = layout.sections[link]
    where = TableRange(section.offset, section.size, section.entsize, linked.offset, linked.size)
    if not (with_versions and section.type == SHT_DYNSYM):
        return _Table(name, where, None, [], [])
    entries = entry_count(data, layout.elf_class, where)
    versym = _versym(layout, index, entries)
    return _Table(name, where, versym, _version_chains(data, layout), [])


def _loader_table(
    data: bytes | memoryview, layout: Layout, dynamic: Dynamic, with_versions: bool
) -> _Table | None:
    """.dynsym as the loader finds it through PT_DYNAMIC (no section headers)."""
    tables = dynamic_symbol_tables(data, layout, dynamic)
    if tables is None:
        return None
    entsize = SYM_SIZE[layout.elf_class]
    if tables.count * entsize > len(data) - tables.symtab:
        raise MalformedElf(f"{tables.count} dynamic symbols cannot fit in the file")
    where = TableRange(tables.symtab, tables.count * entsize, entsize, *tables.strtab)
    chains: list[VersionChain] = []
    if with_versions:
        strtab = data[tables.strtab[0] : tables.strtab[0] + tables.strtab[1]]
        for found, needed in ((tables.verdef, False), (tables.verneed, True)):
            if found is not None:
                offset, count = found
                chains.append(VersionChain(offset, len(data) - offset, count, strtab, needed))
    warning = "no section headers: .dynsym read through PT_DYNAMIC"
    return _Table(".dynsym", where, tables.versym, chains, [warning])


def _parse(data: bytes | memoryview, *, with_versions: bool) -> _Parsed:
    layout = parse_layout(data)
    e_type = e_type_name(layout.e_type)
    dynamic = read_dynamic(data, layout)
    needed, soname = needed_and_soname(data, layout, dynamic)
    section_names = _section_names(data, layout)
    want = SHT_SYMTAB if e_type == "REL" else SHT_DYNSYM
    indices = layout.sections_of_type(want)
    table: _Table | None = None
    if indices:
        default = ".symtab" if want == SHT_SYMTAB else ".dynsym"
        name = section_names[indices[0]] or default
        table = _section_table(data, layout, indices[0], name, with_versions)
    elif want == SHT_DYNSYM and not layout.sections:
        table = _loader_table(data, layout, dynamic, with_versions)
    return _Parsed(layout, e_type, needed, soname, section_names, table)


def _exec_stack(p: _Parsed) -> bool | None:
    if p.e_type in ("DYN", "EXEC"):
        stack = [s for s in p.layout.segments if s.type == PT_GNU_STACK]
        if not stack:
            return True  # the loader assumes an executable stack
        return bool(stack[0].flags & PF_X)
    if p.e_type == "REL":
        for section, name in zip(p.layout.sections, p.section_names, strict=True):
            if name == ".note.GNU-stack":
                return bool(section.flags & SHF_EXECINSTR)
        return True
    return None


def _symbols(
    symbols: SymbolTable, rows: list[int], versions: list[str | None], defined: bool
) -> list[Symbol]:
    """Symbol objects for table rows (and their versions), sorted by name, then version."""
    names = symbols.names(rows)
    info = symbols.st_info
    order = sorted(range(len(rows)), key=lambda k: (names[k], versions[k] or ""))
    return [
        Symbol(
            names[k],
            versions[k],
            BINDING_NAMES[info[rows[k]] >> 4],
            TYPE_NAMES[info[rows[k]] & 0xF],
            defined,
        )
        for k in order
    ]


def _image(data: bytes | memoryview, location: str, prefixes: Sequence[str] | None) -> ElfImage:
    p = _parse(data, with_versions=True)
    layout, table = p.layout, p.table
    imports: list[Symbol] = []
    exports: list[Symbol] = []
    if table is not None:
        symbols = read_symbol_table(data, layout.elf_class, layout.little_endian, table.where)
        import_rows, export_rows = symbols.import_rows(), symbols.export_rows()
        if prefixes is not None:
            import_rows = symbols.keep_prefixed(import_rows, prefixes)
            export_rows = symbols.keep_prefixed(export_rows, prefixes)
        entries = len(symbols.st_name)
        rows = import_rows + export_rows
        versions = symbol_versions(data, layout, table.versym, entries, rows, table.chains)
        imports = _symbols(symbols, import_rows, versions[: len(import_rows)], False)
        exports = _symbols(symbols, export_rows, versions[len(import_rows) :], True)
    return ElfImage(
        location=location,
        elf_class=32 if layout.elf_class == 1 else 64,
        little_endian=layout.little_endian,
        e_type=p.e_type,
        machine=machine_name(layout.e_machine),
        imports=imports,
        exports=exports,
        needed=p.needed,
        soname=p.soname,
        exec_stack=_exec_stack(p),
        size=len(data),
        symbol_table=table.name if table else None,
        symbol_count=p.symbol_count(data),
        name_prefixes=tuple(prefixes) if prefixes is not None else None,
        warnings=table.warnings if table else [],
    )


def _names(data: bytes | memoryview, location: str) -> ElfNames:
    p = _parse(data, with_versions=False)
    layout, table = p.layout, p.table
    imports: list[str] = []
    exports: list[str] = []
    if table is not None:
        imports, exports = sorted_names(data, layout.elf_class, layout.little_endian, table.where)
    return ElfNames(
        location=location,
        e_type=p.e_type,
        machine=machine_name(layout.e_machine),
        elf_class=32 if layout.elf_class == 1 else 64,
        imports=imports,
        exports=exports,
        needed=p.needed,
        soname=p.soname,
        size=len(data),
        symbol_table=table.name if table else None,
        symbol_count=p.symbol_count(data),
        warnings=table.warnings if table else [],
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
    return guarded(location, lambda: _image(data, location, name_prefixes))


def read_elf_names(data: bytes | memoryview, location: str) -> ElfNames:
    """Sorted import and export names of one ELF image (what `shimkit symbols` prints):
    read_elf's selection and order without Symbol objects or versions. Raises
    ElfFormatError(location, message) if the image is malformed."""
    return guarded(location, lambda: _names(data, location))
