"""Where did a loaded blob's imports bind? Read its resolved GOT, ask dladdr.

After an RTLD_NOW dlopen every GOT slot of an imported function or object
holds the address ld.so chose. For each relocation against a named symbol we
read that slot and let dladdr name the library the address lies in. This is
the ground truth of binding (no guessing from search order). x86-64 and
AArch64 relocation types are understood.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from shimkit.elf import ElfFormatError
from shimkit.elf.relocations import read_relocations
from shimkit.errors import ShimkitError

# GLOB_DAT, JUMP_SLOT and absolute 64-bit relocations: the slot holds the
# symbol's address (plus addend for the absolute kind).
_SLOT_TYPES = {
    "EM_X86_64": {1, 6, 7},  # R_X86_64_64, GLOB_DAT, JUMP_SLOT
    "EM_AARCH64": {257, 1025, 1026},  # R_AARCH64_ABS64, GLOB_DAT, JUMP_SLOT
}


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_libc = ctypes.CDLL(None)
_dladdr = _libc.dladdr
_dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
_dladdr.restype = ctypes.c_int


def library_of(address: int) -> str | None:
    """The path of the loaded object containing `address` (None if none)."""
    info = _DlInfo()
    if address == 0 or _dladdr(ctypes.c_void_p(address), ctypes.byref(info)) == 0:
        return None
    name = info.dli_fname.decode() if info.dli_fname else None
    return os.path.realpath(name) if name else None


@dataclass(frozen=True)
class Binding:
    symbol: str
    library: str | None  # None: slot empty or address in no loaded object


def resolved_imports(blob: bytes, base: int, wanted: set[str] | None = None) -> list[Binding]:
    """Bindings of the named relocations of a blob loaded at `base`."""
    try:
        relocations = read_relocations(blob, "blob")
    except ElfFormatError as exc:
        raise ShimkitError(f"blob: cannot read relocations: {exc.message}") from None
    types = _SLOT_TYPES.get(relocations.machine)
    if types is None:
        raise ShimkitError(f"blob: cannot read bindings on {relocations.machine}")
    seen: dict[str, Binding] = {}
    for reloc in relocations.entries:
        name = reloc.symbol
        if reloc.type not in types or not name or name in seen:
            continue
        if wanted is not None and name not in wanted:
            continue
        slot = ctypes.c_uint64.from_address(base + reloc.offset).value
        seen[name] = Binding(name, library_of(slot))
    return sorted(seen.values(), key=lambda b: b.symbol)
