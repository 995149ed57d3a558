"""What both ELF readers share and needs no numpy: constants, error types, machine
names, and the guard that turns every malformation into one ElfFormatError line.

The names-only reader (`shimkit.elf.names`) imports only this and the data
model, so `shimkit symbols` starts without numpy (importing it costs more than
reading libtorch's whole dynamic symbol table).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

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
SHN_UNDEF = 0
SYM_SIZE = {1: 16, 2: 24}  # Elf32_Sym, Elf64_Sym
E_TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}

# Common machines, so the names-only path need not import pyelftools (its enum
# import alone costs more than reading libtorch's table). Values from elf.h.
MACHINES = {
    0: "EM_NONE", 2: "EM_SPARC", 3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64",
    22: "EM_S390", 40: "EM_ARM", 43: "EM_SPARCV9", 62: "EM_X86_64", 183: "EM_AARCH64",
    243: "EM_RISCV", 258: "EM_LOONGARCH",
}  # fmt: skip


def machine_name(value: int) -> str:
    name = MACHINES.get(value)
    if name is not None:
        return name
    from elftools.elf.enums import ENUM_E_MACHINE  # rare machines only

    for key, number in ENUM_E_MACHINE.items():
        if number == value and key.startswith("EM_"):
            return key
    return f"EM_{value}"


def e_type_name(value: int) -> str:
    return E_TYPES.get(value, f"TYPE_{value}")


class HeaderError(ValueError):
    """The bytes are not a well-formed ELF image; the message says why (one line)."""


class SymbolTableError(ValueError):
    """A symbol table or its string table is malformed; the message is one line."""


class VersionError(ValueError):
    """The version sections are malformed; the message is one line."""


_MALFORMED = (
    ValueError, TypeError, IndexError, KeyError, OverflowError, EOFError, AssertionError,
    UnicodeError, AttributeError, RecursionError, struct.error,
)  # fmt: skip
TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


def guarded(location: str, fn: Callable[[], T]) -> T:
    """Run a parse step; turn every malformation into one ElfFormatError line.

    The error is raised after the except block, so it carries no __context__:
    the original traceback (whose frames hold views of the caller's buffer) is
    freed first, and a caller's `with mmap.mmap(...)` can close.
    """
    try:
        return fn()
    except (HeaderError, SymbolTableError, VersionError) as exc:
        message = str(exc)
    except _MALFORMED as exc:
        # Last line of defence: numpy/struct/array raise these on contents no check foresaw.
        message = f"malformed ELF: {type(exc).__name__}: {one_line(exc)}"
    raise ElfFormatError(location, message)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def out_of_bounds_message(kind: str, extents: list[tuple[int, int, int]], size: int) -> str | None:
    """The error for the first `(index, offset, length)` extent that ends past `size`
    (computed exactly: a 64-bit offset + size that wraps is past the end too), or None."""
    for index, offset, length in extents:
        if offset + length > size:
            return (
                f"truncated or bad offsets: {kind} [{index}] (offset 0x{offset:x}, size "
                f"0x{length:x}) ends past the end of the file (0x{size:x} bytes)"
            )
    return None
