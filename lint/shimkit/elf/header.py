"""Bounds-checked parsing of the ELF file header, section and program headers.

This layer trusts nothing: every table is checked against the buffer size
before it is viewed. It is used both to validate an image before pyelftools
sees it and to find the header-declared extent of an ELF image embedded in
another file (carving).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache

import numpy as np

from shimkit.elf.elfdefs import (  # noqa: F401 (re-exported: the names other modules import)
    ELF_MAGIC,
    MACHINES,
    PF_X,
    PT_DYNAMIC,
    PT_GNU_STACK,
    PT_LOAD,
    SHF_EXECINSTR,
    SHN_XINDEX,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_NOBITS,
    SHT_NULL,
    SHT_STRTAB,
    SHT_SYMTAB,
    HeaderError,
    machine_name,
    out_of_bounds_message,
)

_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_EHDR_SIZE = {1: 52, 2: 64}
_SHENT = {1: 40, 2: 64}
_PHENT = {1: 32, 2: 56}


@cache
def _shdr_dtype(elf_class: int, endian: str) -> np.dtype:
    word = endian + ("u4" if elf_class == 1 else "u8")
    u4 = endian + "u4"
    return np.dtype(
        [
            ("sh_name", u4),
            ("sh_type", u4),
            ("sh_flags", word),
            ("sh_addr", word),
            ("sh_offset", word),
            ("sh_size", word),
            ("sh_link", u4),
            ("sh_info", u4),
            ("sh_addralign", word),
            ("sh_entsize", word),
        ]
    )


@cache
def _phdr_dtype(elf_class: int, endian: str) -> np.dtype:
    u4 = endian + "u4"
    if elf_class == 1:
        names = ("p_type", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz", "p_flags")
        return np.dtype([(n, u4) for n in (*names, "p_align")])
    u8 = endian + "u8"
    return np.dtype(
        [
            ("p_type", u4),
            ("p_flags", u4),
            ("p_offset", u8),
            ("p_vaddr", u8),
            ("p_paddr", u8),
            ("p_filesz", u8),
            ("p_memsz", u8),
            ("p_align", u8),
        ]
    )


@dataclass
class ElfLayout:
    """Validated header facts plus the section and program header tables."""

    elf_class: int
    little_endian: bool
    e_type: int
    e_machine: int
    shoff: int
    phoff: int
    shstrndx: int
    sections: np.ndarray  # structured array, one row per section header (copied)
    segments: np.ndarray  # structured array, one row per program header (copied)
    extent: int  # header-declared end of the image, relative to its start

    @property
    def endian(self) -> str:
        return "<" if self.little_endian else ">"

    def sections_of_type(self, sh_type: int) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.sections["sh_type"] == sh_type)]


def _hex(value: int) -> str:
    return f"0x{value:x}"


def parse_layout(data: bytes | memoryview, *, strict_ident: bool = False) -> ElfLayout:
    """Parse and bounds-check an ELF image that starts at data[0].

    `len(data)` is the space available: every table must fit inside it.
    `strict_ident` also requires EI_VERSION == 1 and e_ehsize to match the
    class (used when scanning arbitrary bytes for embedded images).
    """
    size = len(data)
    if size < 16:
        raise HeaderError(f"truncated: {size} bytes is shorter than the ELF identification (16)")
    ident = bytes(data[:16])
    if ident[:4] != ELF_MAGIC:
        raise HeaderError("not an ELF file (bad magic)")
    elf_class, ei_data, ei_version = ident[4], ident[5], ident[6]
    if elf_class not in (1, 2):
        raise HeaderError(f"bad EI_CLASS {elf_class} (expected 1 or 2)")
    if ei_data not in (1, 2):
        raise HeaderError(f"bad EI_DATA {ei_data} (expected 1 or 2)")
    if strict_ident and ei_version != 1:
        raise HeaderError(f"bad EI_VERSION {ei_version}")
    endian = "<" if ei_data == 1 else ">"
    ehdr_size = _EHDR_SIZE[elf_class]
    if size < ehdr_size:
        raise HeaderError(f"truncated: ELF header needs {ehdr_size} bytes, file has {size}")
    (
        e_type,
        e_machine,
        _e_version,
        _e_entry,
        e_phoff,
        e_shoff,
        _e_flags,
        e_ehsize,
        e_phentsize,
        e_phnum,
        e_shentsize,
        e_shnum,
        e_shstrndx,
    ) = struct.unpack_from(endian + _EHDR[elf_class], data, 16)
    if strict_ident and e_ehsize != ehdr_size:
        raise HeaderError(f"bad e_ehsize {e_ehsize} (expected {ehdr_size})")
    extent = ehdr_size

    sh_dtype = _shdr_dtype(elf_class, endian)
    sections = np.zeros(0, dtype=sh_dtype)
    if e_shoff:
        if e_shentsize != _SHENT[elf_class]:
            raise HeaderError(f"bad e_shentsize {e_shentsize} (expected {_SHENT[elf_class]})")
        if e_shoff + e_shentsize > size:
            raise HeaderError(
                f"truncated: section headers extend past end of file "
                f"({_hex(e_shoff + e_shentsize)} > {_hex(size)})"
            )
        first = np.frombuffer(data, dtype=sh_dtype, count=1, offset=e_shoff)[0]
        count = e_shnum if e_shnum else int(first["sh_size"])  # extended numbering
        end = e_shoff + count * e_shentsize
        if end > size:
            raise HeaderError(
                f"truncated: section headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        sections = np.frombuffer(data, dtype=sh_dtype, count=count, offset=e_shoff).copy()
        extent = max(extent, end)
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = int(first["sh_link"])
        if e_shstrndx >= count:
            raise HeaderError(f"bad e_shstrndx {e_shstrndx} (only {count} sections)")
        present = (sections["sh_type"] != SHT_NOBITS) & (sections["sh_type"] != SHT_NULL)
        ends = sections["sh_offset"][present].astype(np.uint64) + sections["sh_size"][present]
        overflow = ends < sections["sh_offset"][present]
        if ends.size:
            last = int(ends.max())
            if overflow.any() or last > size:
                rows = np.flatnonzero(present).tolist()
                extents = zip(
                    rows,
                    sections["sh_offset"][rows].tolist(),
                    sections["sh_size"][rows].tolist(),
                    strict=True,
                )
                raise HeaderError(str(out_of_bounds_message("section", list(extents), size)))
            extent = max(extent, last)

    ph_dtype = _phdr_dtype(elf_class, endian)
    segments = np.zeros(0, dtype=ph_dtype)
    if e_phnum:
        if e_phentsize != _PHENT[elf_class]:
            raise HeaderError(f"bad e_phentsize {e_phentsize} (expected {_PHENT[elf_class]})")
        end = e_phoff + e_phnum * e_phentsize
        if end > size:
            raise HeaderError(
                f"truncated: program headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        segments = np.frombuffer(data, dtype=ph_dtype, count=e_phnum, offset=e_phoff).copy()
        extent = max(extent, end)
        ends = segments["p_offset"].astype(np.uint64) + segments["p_filesz"]
        if ends.size:
            last = int(ends.max())
            if (ends < segments["p_offset"]).any() or last > size:
                extents = zip(
                    range(segments.size),
                    segments["p_offset"].tolist(),
                    segments["p_filesz"].tolist(),
                    strict=True,
                )
                raise HeaderError(str(out_of_bounds_message("segment", list(extents), size)))
            extent = max(extent, last)

    return ElfLayout(
        elf_class=elf_class,
        little_endian=ei_data == 1,
        e_type=e_type,
        e_machine=e_machine,
        shoff=e_shoff,
        phoff=e_phoff,
        shstrndx=e_shstrndx,
        sections=sections,
        segments=segments,
        extent=extent,
    )
