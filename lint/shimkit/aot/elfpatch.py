"""A minimal, append-only ELF patcher for blob imports (ELF64 little-endian).

The alternative to LIEF's builder, which re-lays out the whole file (a
round trip with no change already rewrites .text and .dynamic). This patcher
moves nothing: every original byte stays at its offset and address, so the
result differs from the input only where the rename requires it.

- renamed imports: the new names are appended to a copy of .dynstr placed
  in a new page-aligned region at the end of the file, loaded by a PT_LOAD
  that replaces a PT_NOTE program header (build-id notes are not needed to
  load). Old string offsets stay valid (the copy starts with the old table),
  so only the renamed .dynsym entries, DT_STRTAB/DT_STRSZ and the .dynstr
  section header change. Only UNDEFINED symbols may be renamed: hash tables
  index defined ones.
- dropped NEEDED entries: removed from .dynamic in place, DT_NULL-padded;
  added NEEDED entries (`add_needed`) reuse the freed slots.
- executable stack: PF_X cleared on PT_GNU_STACK.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from shimkit.elf import ELF_MAGIC

PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_GNU_STACK = 1, 2, 4, 0x6474E551
PF_X, PF_R = 0x1, 0x4
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
SHT_DYNSYM = 11

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_DYN = struct.Struct("<qQ")


class PatchError(Exception):
    """The file cannot be patched this way (message says why)."""


@dataclass
class PatchResult:
    data: bytes
    renamed: list[str] = field(default_factory=list)
    dropped_needed: list[str] = field(default_factory=list)
    cleared_exec_stack: bool = False


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise PatchError(f"string offset {offset:#x} is outside .dynstr")
    return table[offset:end].decode("utf-8", "replace")


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


class _Elf:
    def __init__(self, data: bytes) -> None:
        if len(data) < _EHDR.size or not data.startswith(ELF_MAGIC):
            raise PatchError("not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise PatchError("only 64-bit little-endian ELF files are supported")
        fields = _EHDR.unpack_from(data, 0)
        self.phoff, self.shoff = fields[5], fields[6]
        self.phentsize, self.phnum = fields[9], fields[10]
        self.shentsize, self.shnum = fields[11], fields[12]
        if self.phentsize != _PHDR.size or (self.shnum and self.shentsize != _SHDR.size):
            raise PatchError("unexpected program/section header entry size")
        if self.phoff + self.phnum * _PHDR.size > len(data):
            raise PatchError("program headers run past the end of the file")
        if self.shoff + self.shnum * _SHDR.size > len(data):
            raise PatchError("section headers run past the end of the file")
        self.buf = bytearray(data)
        self.phdrs = [
            list(_PHDR.unpack_from(data, self.phoff + i * _PHDR.size)) for i in range(self.phnum)
        ]
        self.shdrs = [
            list(_SHDR.unpack_from(data, self.shoff + i * _SHDR.size)) for i in range(self.shnum)
        ]

    def write_phdr(self, index: int) -> None:
        _PHDR.pack_into(self.buf, self.phoff + index * _PHDR.size, *self.phdrs[index])

    def write_shdr(self, index: int) -> None:
        _SHDR.pack_into(self.buf, self.shoff + index * _SHDR.size, *self.shdrs[index])

    def vaddr_to_offset(self, vaddr: int) -> int:
        for p_type, _, offset, start, _, filesz, _, _ in self.phdrs:
            if p_type == PT_LOAD and start <= vaddr < start + filesz:
                return offset + vaddr - start
        raise PatchError(f"address {vaddr:#x} is not in a loaded segment")

    def dynamic(self) -> tuple[int, list[tuple[int, int]]]:
        found = [p for p in self.phdrs if p[0] == PT_DYNAMIC]
        if not found:
            raise PatchError("no PT_DYNAMIC segment (a static file?)")
        offset, size = found[0][2], found[0][5]
        if offset + size > len(self.buf):
            raise PatchError("PT_DYNAMIC runs past the end of the file")
        entries = [
            _DYN.unpack_from(self.buf, offset + i)
            for i in range(0, size - _DYN.size + 1, _DYN.size)
        ]
        return offset, entries


def patch_blob(
    data: bytes,
    rename: Callable[[str], str | None],
    drop_needed: Callable[[str], bool],
    clear_exec_stack: bool = True,
    add_needed: tuple[str, ...] = (),
) -> PatchResult:
    """Rename undefined dynamic symbols (`rename` returns the new name or None),
    drop matching NEEDED entries, add `add_needed` ones, clear the exec-stack flag."""
    elf = _Elf(data)
    dyn_offset, entries = elf.dynamic()
    tags = {tag: value for tag, value in reversed(entries)}
    if DT_STRTAB not in tags or DT_STRSZ not in tags:
        raise PatchError(".dynamic has no DT_STRTAB/DT_STRSZ")
    str_offset = elf.vaddr_to_offset(tags[DT_STRTAB])
    strtab = bytes(elf.buf[str_offset : str_offset + tags[DT_STRSZ]])
    result = PatchResult(data=b"")

    # 1. Renames: new names go after a copy of the old table.
    dynsym = [i for i, s in enumerate(elf.shdrs) if s[1] == SHT_DYNSYM]
    if not dynsym:
        raise PatchError("no .dynsym section header")
    sym_shdr = elf.shdrs[dynsym[0]]
    str_index = sym_shdr[6]
    if not 0 < str_index < len(elf.shdrs):
        raise PatchError(".dynsym's sh_link does not name a section")
    new_table = bytearray(strtab)
    added: dict[str, int] = {}

    def string_offset(text: str) -> int:
        """Offset of `text` in the (possibly extended) table, appending it if needed."""
        encoded = text.encode() + b"\0"
        at = strtab.find(b"\0" + encoded)
        if at >= 0:
            return at + 1
        if text not in added:
            added[text] = len(new_table)
            new_table.extend(encoded)
        return added[text]

    sym_offset, sym_count = sym_shdr[4], sym_shdr[5] // _SYM.size
    if sym_offset + sym_count * _SYM.size > len(elf.buf):
        raise PatchError(".dynsym runs past the end of the file")
    for index in range(1, sym_count):
        at = sym_offset + index * _SYM.size
        st_name, st_info, st_other, st_shndx, st_value, st_size = _SYM.unpack_from(elf.buf, at)
        if st_shndx != 0:
            continue
        name = _cstr(strtab, st_name)
        new_name = rename(name)
        if new_name is None or new_name == name:
            continue
        offset = string_offset(new_name)
        _SYM.pack_into(elf.buf, at, offset, st_info, st_other, st_shndx, st_value, st_size)
        result.renamed.append(name)

    # 2. NEEDED entries: filter in place, add new ones first, pad with DT_NULL.
    kept: list[tuple[int, int]] = []
    for tag, value in entries:
        if tag == DT_NEEDED and drop_needed(_cstr(strtab, value)):
            result.dropped_needed.append(_cstr(strtab, value))
            continue
        kept.append((tag, value))
    while kept and kept[-1][0] == DT_NULL:
        kept.pop()
    kept = [(DT_NEEDED, string_offset(library)) for library in add_needed] + kept
    if len(kept) + 1 > len(entries):
        raise PatchError("no free .dynamic slot for a new NEEDED entry")

    if added:
        loads = [i for i, p in enumerate(elf.phdrs) if p[0] == PT_LOAD]
        notes = [i for i, p in enumerate(elf.phdrs) if p[0] == PT_NOTE and i > max(loads)]
        if not notes:
            raise PatchError(
                "no spare PT_NOTE program header after the PT_LOADs to map new strings"
            )
        alignment = max([0x1000] + [elf.phdrs[i][7] for i in loads])
        end_vaddr = max(elf.phdrs[i][3] + elf.phdrs[i][6] for i in loads)
        new_offset = _align(len(elf.buf), alignment)
        new_vaddr = _align(end_vaddr, alignment)
        size = len(new_table)
        elf.phdrs[notes[-1]] = [
            PT_LOAD,
            PF_R,
            new_offset,
            new_vaddr,
            new_vaddr,
            size,
            size,
            alignment,
        ]
        elf.write_phdr(notes[-1])
        kept = [
            (tag, new_vaddr if tag == DT_STRTAB else size if tag == DT_STRSZ else value)
            for tag, value in kept
        ]
        shdr = elf.shdrs[str_index]
        shdr[3], shdr[4], shdr[5] = new_vaddr, new_offset, size
        elf.write_shdr(str_index)
        elf.buf += b"\0" * (new_offset - len(elf.buf)) + new_table

    kept += [(DT_NULL, 0)] * (len(entries) - len(kept))
    for i, (tag, value) in enumerate(kept):
        _DYN.pack_into(elf.buf, dyn_offset + i * _DYN.size, tag, value)

    # 3. Executable stack.
    if clear_exec_stack:
        for index, phdr in enumerate(elf.phdrs):
            if phdr[0] == PT_GNU_STACK and phdr[1] & PF_X:
                phdr[1] &= ~PF_X
                elf.write_phdr(index)
                result.cleared_exec_stack = True

    result.data = bytes(elf.buf)
    return result
