"""Relocations against named dynamic symbols: the slots (GOT entries) the loader fills
with each import's address. `shimkit.runtime.bindings` reads those slots in a loaded
blob to see where every import bound.

Every SHT_RELA/SHT_REL section is read (.rela.dyn, .rela.plt, ...), each with the
symbol table its sh_link names, bounds-checked like the rest of the reader.
"""

from __future__ import annotations

from typing import NamedTuple

from shimkit.elf.layout import (
    SHT_STRTAB,
    Layout,
    MalformedElf,
    guarded,
    machine_name,
    parse_layout,
    read_words,
)
from shimkit.elf.symtab import TableRange, read_symbol_table

SHT_RELA = 4
SHT_REL = 9


class Relocation(NamedTuple):
    offset: int  # r_offset: the slot's address (relative to the load base of a DSO)
    type: int  # r_type, machine-specific (e.g. R_X86_64_GLOB_DAT)
    symbol: str  # the name of the symbol it refers to ("" for none)


class Relocations(NamedTuple):
    machine: str  # e.g. "EM_X86_64": relocation types mean something per machine
    entries: list[Relocation]


def _section_relocations(data: bytes | memoryview, layout: Layout, index: int) -> list[Relocation]:
    section = layout.sections[index]
    is64 = layout.elf_class == 2
    words_per_entry = 3 if section.type == SHT_RELA else 2  # r_offset r_info [r_addend]
    width = 8 if is64 else 4
    if section.size % (words_per_entry * width):
        raise MalformedElf(f"relocation section [{index}]: size is not whole entries")
    if section.offset + section.size > len(data):
        raise MalformedElf(f"relocation section [{index}] extends past end of file")
    link = section.link
    if not 0 < link < len(layout.sections):
        raise MalformedElf(f"relocation section [{index}]: sh_link {link} is not a section")
    symtab = layout.sections[link]
    if not 0 < symtab.link < len(layout.sections):
        raise MalformedElf(f"symbol table [{link}]: sh_link {symtab.link} is not a section")
    strtab = layout.sections[symtab.link]
    if strtab.type != SHT_STRTAB:
        raise MalformedElf(f"symbol table [{link}]: sh_link {symtab.link} is not a string table")
    where = TableRange(symtab.offset, symtab.size, symtab.entsize, strtab.offset, strtab.size)
    symbols = read_symbol_table(data, layout.elf_class, layout.little_endian, where)
    words = read_words(data, section.offset, section.size // width, width, layout.little_endian)
    offsets, infos = words[0::words_per_entry], words[1::words_per_entry]
    shift, mask = (32, 0xFFFFFFFF) if is64 else (8, 0xFF)
    indices = [info >> shift for info in infos]
    if any(i >= len(symbols.st_name) for i in indices):
        raise MalformedElf(f"relocation section [{index}]: a symbol index past its table")
    named = [i for i in dict.fromkeys(indices) if i]
    names = dict(zip(named, symbols.names(named), strict=True))
    return [
        Relocation(offset, info & mask, names.get(symbol, ""))
        for offset, info, symbol in zip(offsets, infos, indices, strict=True)
    ]


def read_relocations(data: bytes | memoryview, location: str) -> Relocations:
    """Every relocation of the image with its symbol's name; ElfFormatError if malformed."""

    def parse() -> Relocations:
        layout = parse_layout(data)
        entries: list[Relocation] = []
        for index, section in enumerate(layout.sections):
            if section.type in (SHT_RELA, SHT_REL):
                entries += _section_relocations(data, layout, index)
        return Relocations(machine_name(layout.e_machine), entries)

    return guarded(location, parse)
