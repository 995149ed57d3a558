"""Vectorized reading of ELF symbol tables (.dynsym / .symtab).

The table is viewed in place (mmap or bytes) as a numpy structured array; the
names are decoded from the string table in one pass: the string table is split
on NUL once and each st_name offset is mapped to its piece with searchsorted.
Offsets that point inside a piece (suffix sharing by the linker) are sliced.
On libtorch_cpu.so (74k symbols) this is ~50x faster than iterating pyelftools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from operator import itemgetter

import numpy as np

from shimkit.elf.elfdefs import SHN_UNDEF, SYM_SIZE, SymbolTableError

BINDINGS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "GNU_UNIQUE"}
TYPES = {
    0: "NOTYPE",
    1: "OBJECT",
    2: "FUNC",
    3: "SECTION",
    4: "FILE",
    5: "COMMON",
    6: "TLS",
    10: "IFUNC",
}
BINDING_NAMES = tuple(BINDINGS.get(i, f"BIND_{i}") for i in range(16))
TYPE_NAMES = tuple(TYPES.get(i, f"TYPE_{i}") for i in range(16))


@cache
def sym_dtype(elf_class: int, endian: str) -> np.dtype:
    u4 = endian + "u4"
    u2 = endian + "u2"
    if elf_class == 1:
        return np.dtype(
            [
                ("st_name", u4),
                ("st_value", u4),
                ("st_size", u4),
                ("st_info", "u1"),
                ("st_other", "u1"),
                ("st_shndx", u2),
            ]
        )
    u8 = endian + "u8"
    return np.dtype(
        [
            ("st_name", u4),
            ("st_info", "u1"),
            ("st_other", "u1"),
            ("st_shndx", u2),
            ("st_value", u8),
            ("st_size", u8),
        ]
    )


@dataclass
class RawSymbols:
    """Decoded columns of a symbol table, index 0 (the null symbol) dropped."""

    names: list[str]
    bind: np.ndarray  # uint8
    type: np.ndarray  # uint8
    defined: np.ndarray  # bool
    index: np.ndarray  # original table index of each row (for .gnu.version lookups)

    @classmethod
    def empty(cls) -> RawSymbols:
        none = np.zeros(0, np.uint8)
        return cls([], none, none, np.zeros(0, bool), np.zeros(0, np.int64))


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def decode_names(strtab: bytes, offsets: np.ndarray) -> list[str]:
    """Decode the NUL-terminated strings at `offsets` in `strtab`.

    Every offset must be < len(strtab) (checked by the caller). A string
    without a terminating NUL ends at the end of the table.
    """
    if offsets.size == 0:
        return []
    ascii_text = strtab.isascii()
    pieces: list[str] | list[bytes] = (
        strtab.decode("ascii").split("\0") if ascii_text else strtab.split(b"\0")
    )
    # Piece k starts one byte after the (k-1)-th NUL: found vectorized, no per-piece Python.
    nul = np.flatnonzero(np.frombuffer(strtab, dtype=np.uint8) == 0)
    starts = np.empty(nul.size + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = nul + 1
    offs = offsets.astype(np.int64, copy=False)
    idx = np.searchsorted(starts, offs, side="right") - 1
    skip = offs - starts[idx]
    idx_list = idx.tolist()
    if ascii_text:
        names = list(itemgetter(*idx_list)(pieces)) if len(idx_list) > 1 else [pieces[idx_list[0]]]
    else:
        decoded = {i: _decode(pieces[i]) for i in set(idx_list)}  # type: ignore[arg-type]
        names = [decoded[i] for i in idx_list]
    for row in np.flatnonzero(skip).tolist():
        piece = pieces[idx_list[row]]
        tail = piece[int(skip[row]) :]
        names[row] = tail if ascii_text else _decode(tail)  # type: ignore[assignment]
    return names  # type: ignore[return-value]


def _prefix_mask(strtab: bytes, offsets: np.ndarray, prefixes: Sequence[bytes]) -> np.ndarray:
    """Rows whose name starts with one of `prefixes`, decided without decoding names."""
    buf = np.frombuffer(strtab + b"\0" * 256, dtype=np.uint8)
    mask = np.zeros(offsets.shape, dtype=bool)
    for prefix in prefixes:
        if not prefix:
            return np.ones(offsets.shape, dtype=bool)
        want = np.frombuffer(prefix[:256], dtype=np.uint8)
        # Narrow by the first byte first: cheap, and most names fail there.
        cand = np.flatnonzero(buf[offsets] == want[0])
        if cand.size and want.size > 1:
            window = offsets[cand, None].astype(np.int64) + np.arange(want.size)
            cand = cand[(buf[window] == want).all(axis=1)]
        mask[cand] = True
    return mask


def read_symbol_table(
    data: bytes | memoryview,
    *,
    elf_class: int,
    endian: str,
    table: tuple[int, int, int],
    strtab: tuple[int, int],
    prefixes: Sequence[str] | None = None,
) -> RawSymbols:
    """Read the symbol table at `table` = (offset, size, entsize) with string table `strtab` =
    (offset, size). Both ranges must lie inside `data` (checked here too)."""
    size = len(data)
    off, length, entsize = table
    str_off, str_size = strtab
    want = SYM_SIZE[elf_class]
    if entsize not in (0, want):
        raise SymbolTableError(f"bad symbol table sh_entsize {entsize} (expected {want})")
    if off + length > size or str_off + str_size > size:
        raise SymbolTableError("symbol or string table extends past end of file")
    if length % want:
        raise SymbolTableError(
            f"symbol table size {length} is not a multiple of the entry size {want}"
        )
    count = length // want
    dtype = sym_dtype(elf_class, endian)
    if count <= 1:
        return RawSymbols.empty()
    syms = np.frombuffer(data, dtype=dtype, count=count - 1, offset=off + want)
    st_name = syms["st_name"]
    if int(st_name.max()) >= max(str_size, 1):
        bad = int(np.argmax(st_name))
        raise SymbolTableError(
            f"symbol [{bad + 1}] name offset 0x{int(st_name[bad]):x} is past the end of "
            f"its string table (size 0x{str_size:x})"
        )
    info = syms["st_info"]
    shndx = syms["st_shndx"]
    index = np.arange(1, count, dtype=np.int64)
    strtab_bytes = bytes(data[str_off : str_off + str_size])
    if prefixes is not None:
        keep = _prefix_mask(strtab_bytes, st_name, [p.encode("utf-8") for p in prefixes])
        st_name, info, shndx, index = st_name[keep], info[keep], shndx[keep], index[keep]
    names = decode_names(strtab_bytes, st_name)
    return RawSymbols(
        names=names,
        bind=(info >> 4).astype(np.uint8),
        type=(info & 0xF).astype(np.uint8),
        defined=np.asarray(shndx != SHN_UNDEF),
        index=index,
    )
