"""The ELF file header, section headers and program headers, bounds-checked.

This layer trusts nothing: every table is checked against the buffer before it
is read, and every malformation is a `MalformedElf` with a one-line message.
It validates an image before anything else reads it and gives the
header-declared extent of an image embedded in another file (carving).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from shimkit.elf.model import ElfFormatError

ELF_MAGIC = b"\x7fELF"
SHT_NULL = 0
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_DYNAMIC = 6
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF
SHF_EXECINSTR = 0x4
PT_LOAD = 1
PT_DYNAMIC = 2
PT_GNU_STACK = 0x6474E551
PF_X = 0x1
SHN_XINDEX = 0xFFFF
SYM_SIZE = {1: 16, 2: 24}  # Elf32_Sym, Elf64_Sym by EI_CLASS
E_TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
# Values from elf.h; any other machine is named by its number.
MACHINES = {
    0: "EM_NONE", 2: "EM_SPARC", 3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64",
    22: "EM_S390", 40: "EM_ARM", 43: "EM_SPARCV9", 62: "EM_X86_64", 183: "EM_AARCH64",
    243: "EM_RISCV", 258: "EM_LOONGARCH",
}  # fmt: skip

_EHDR = {1: "HHIIIIIHHHHHH", 2: "HHIQQQIHHHHHH"}
_EHDR_SIZE = {1: 52, 2: 64}
_SHDR = {1: "10I", 2: "IIQQQQIIQQ"}
_SHENT = {1: 40, 2: 64}
_PHDR = {1: "8I", 2: "IIQQQQQQ"}
_PHENT = {1: 32, 2: 56}
_TYPECODE = {array(code).itemsize: code for code in "QLIHB"}  # width in bytes -> typecode
_NATIVE_LITTLE = sys.byteorder == "little"


class MalformedElf(ValueError):
    """The bytes are not a well-formed ELF image; the message says why (one line)."""


class Section(NamedTuple):
    """One section header (Elf32_Shdr/Elf64_Shdr, fields in file order)."""

    name: int  # offset into the section name table
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int


class Segment(NamedTuple):
    """The program header fields the reader uses."""

    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int


class Layout(NamedTuple):
    """Validated header facts plus the section and program header tables."""

    elf_class: int  # EI_CLASS: 1 (32-bit) or 2 (64-bit)
    little_endian: bool
    e_type: int
    e_machine: int
    shoff: int
    phoff: int
    shstrndx: int
    sections: list[Section]
    segments: list[Segment]
    extent: int  # header-declared end of the image, relative to its start

    @property
    def endian(self) -> str:
        return "<" if self.little_endian else ">"

    def sections_of_type(self, sh_type: int) -> list[int]:
        return [i for i, section in enumerate(self.sections) if section.type == sh_type]

    def vaddr_to_offset(self, addr: int) -> int | None:
        """File offset of a virtual address inside a PT_LOAD segment's file image, else None."""
        for seg in self.segments:
            if seg.type == PT_LOAD and seg.vaddr <= addr < seg.vaddr + seg.filesz:
                return addr - seg.vaddr + seg.offset
        return None


def read_words(
    data: bytes | memoryview, offset: int, count: int, width: int, little: bool
) -> array[int]:
    """`count` unsigned integers of `width` bytes at `offset`, in host order.

    The caller has checked the range; a short read here is a MalformedElf.
    """
    words = array(_TYPECODE[width])
    chunk = data[offset : offset + count * width]
    if offset < 0 or len(chunk) != count * width:
        raise MalformedElf(f"table at 0x{offset:x} extends past end of file")
    words.frombytes(chunk)
    if little != _NATIVE_LITTLE and width > 1:
        words.byteswap()
    return words


def string_at(table: bytes | memoryview, offset: int, what: str) -> str:
    """The NUL-terminated string at `offset` of a string table (to the table's end when it
    has no NUL), decoded as UTF-8 (surrogateescape). Copies only the string's bytes: a
    .dynstr may hold megabytes of names."""
    if offset >= len(table):
        raise MalformedElf(f"{what}: offset 0x{offset:x} past its string table")
    chunk = bytes(table[offset : offset + 256])
    while b"\0" not in chunk and offset + len(chunk) < len(table):  # a long name: read on
        chunk = bytes(table[offset : offset + 2 * len(chunk)])
    end = chunk.find(b"\0")
    return chunk[: end if end >= 0 else len(chunk)].decode("utf-8", "surrogateescape")


def machine_name(value: int) -> str:
    return MACHINES.get(value, f"EM_{value}")


def e_type_name(value: int) -> str:
    return E_TYPES.get(value, f"TYPE_{value}")


def _hex(value: int) -> str:
    return f"0x{value:x}"


def out_of_bounds(kind: str, extents: list[tuple[int, int, int]], size: int) -> None:
    """Raise for the first `(index, offset, length)` extent that ends past `size` (a
    64-bit offset + size that would wrap is past the end too: Python ints do not)."""
    for index, offset, length in extents:
        if offset + length > size:
            raise MalformedElf(
                f"truncated or bad offsets: {kind} [{index}] (offset 0x{offset:x}, size "
                f"0x{length:x}) ends past the end of the file (0x{size:x} bytes)"
            )


def parse_layout(data: bytes | memoryview, *, strict_ident: bool = False) -> Layout:
    """Parse and bounds-check an ELF image that starts at data[0].

    `len(data)` is the space available: every table must fit inside it.
    `strict_ident` also requires EI_VERSION == 1 and e_ehsize to match the
    class (used when scanning arbitrary bytes for embedded images).
    """
    size = len(data)
    if size < 16:
        raise MalformedElf(f"truncated: {size} bytes is shorter than the ELF identification (16)")
    ident = bytes(data[:16])
    if ident[:4] != ELF_MAGIC:
        raise MalformedElf("not an ELF file (bad magic)")
    elf_class, ei_data, ei_version = ident[4], ident[5], ident[6]
    if elf_class not in (1, 2):
        raise MalformedElf(f"bad EI_CLASS {elf_class} (expected 1 or 2)")
    if ei_data not in (1, 2):
        raise MalformedElf(f"bad EI_DATA {ei_data} (expected 1 or 2)")
    if strict_ident and ei_version != 1:
        raise MalformedElf(f"bad EI_VERSION {ei_version}")
    endian = "<" if ei_data == 1 else ">"
    ehdr_size = _EHDR_SIZE[elf_class]
    if size < ehdr_size:
        raise MalformedElf(f"truncated: ELF header needs {ehdr_size} bytes, file has {size}")
    fields = struct.unpack_from(endian + _EHDR[elf_class], data, 16)
    e_type, e_machine, _version, _entry, e_phoff, e_shoff, _flags, e_ehsize = fields[:8]
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = fields[8:]
    if strict_ident and e_ehsize != ehdr_size:
        raise MalformedElf(f"bad e_ehsize {e_ehsize} (expected {ehdr_size})")
    extent = ehdr_size

    sections: list[Section] = []
    if e_shoff:
        if e_shentsize != _SHENT[elf_class]:
            raise MalformedElf(f"bad e_shentsize {e_shentsize} (expected {_SHENT[elf_class]})")
        if e_shoff + e_shentsize > size:
            raise MalformedElf(
                f"truncated: section headers extend past end of file "
                f"({_hex(e_shoff + e_shentsize)} > {_hex(size)})"
            )
        shdr = struct.Struct(endian + _SHDR[elf_class])
        first = Section._make(shdr.unpack_from(data, e_shoff))
        count = e_shnum or first.size  # extended numbering: the count is section 0's sh_size
        end = e_shoff + count * e_shentsize
        if end > size:
            raise MalformedElf(
                f"truncated: section headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        sections = list(map(Section._make, shdr.iter_unpack(data[e_shoff:end])))
        extent = max(extent, end)
        if e_shstrndx == SHN_XINDEX:
            e_shstrndx = first.link
        if e_shstrndx >= count:
            raise MalformedElf(f"bad e_shstrndx {e_shstrndx} (only {count} sections)")
        present = [
            (i, s.offset, s.size)
            for i, s in enumerate(sections)
            if s.type not in (SHT_NOBITS, SHT_NULL)
        ]
        out_of_bounds("section", present, size)
        extent = max([extent, *(offset + length for _, offset, length in present)])

    segments: list[Segment] = []
    if e_phnum:
        if e_phentsize != _PHENT[elf_class]:
            raise MalformedElf(f"bad e_phentsize {e_phentsize} (expected {_PHENT[elf_class]})")
        end = e_phoff + e_phnum * e_phentsize
        if end > size:
            raise MalformedElf(
                f"truncated: program headers extend past end of file ({_hex(end)} > {_hex(size)})"
            )
        rows = struct.Struct(endian + _PHDR[elf_class]).iter_unpack(data[e_phoff:end])
        if elf_class == 1:  # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align
            segments = [Segment(r[0], r[6], r[1], r[2], r[4]) for r in rows]
        else:  # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
            segments = [Segment(r[0], r[1], r[2], r[3], r[5]) for r in rows]
        extents = [(i, s.offset, s.filesz) for i, s in enumerate(segments)]
        out_of_bounds("segment", extents, size)
        extent = max([extent, end, *(offset + length for _, offset, length in extents)])

    return Layout(
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


_MALFORMED = (
    ValueError, TypeError, IndexError, KeyError, OverflowError, EOFError, AssertionError,
    UnicodeError, AttributeError, RecursionError, struct.error,
)  # fmt: skip
T = TypeVar("T")


def guarded(location: str, fn: Callable[[], T]) -> T:
    """Run a parse step; turn every malformation into one ElfFormatError line.

    The error is raised after the except block, so it carries no __context__:
    the original traceback (whose frames hold views of the caller's buffer) is
    freed first, and a caller's `with mmap.mmap(...)` can close.
    """
    try:
        return fn()
    except MalformedElf as exc:
        message = str(exc)
    except _MALFORMED as exc:
        # Last line of defence: struct/array raise these on contents no check foresaw.
        message = f"malformed ELF: {type(exc).__name__}: {one_line(exc)}"
    raise ElfFormatError(location, message)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__
