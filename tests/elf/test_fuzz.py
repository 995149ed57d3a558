"""Property tests: hostile bytes never produce a traceback, only ElfImage or one-line errors."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shimkit.elf import ElfFormatError, ElfImage, ElfNames, InputError, read_elf, read_elf_names
from shimkit.elf.layout import SHT_DYNSYM, SHT_SYMTAB, Section, parse_layout
from shimkit.elf.symtab import StringTable
from shimkit.inputs import iter_images, iter_names

from tests.elf.common import FUZZ, python_only
from tests.fixtures.build import build_all

SEEDS = [
    "blob_unprefixed.so",
    "blob_prefixed.o",
    "blob_unprefixed_32.so",
    "be64_blob.so",
    "be32_blob.so",
    "prog_nopie",
    "stripped:blob_unprefixed.so",  # no section headers: .dynsym through PT_DYNAMIC
    "stripped:prog_nopie",
]
SECTIONED = [s for s in SEEDS if not s.startswith("stripped:")]
CONTAINERS = ["model.pt2", "libblobs.a", "model.pte"]
_DATA: dict[str, bytes] = {}


def seed(name: str) -> bytes:
    if name not in _DATA:
        if name.startswith("stripped:"):
            from tests.elf.test_formats_edge import _strip_section_headers

            _DATA[name] = _strip_section_headers(seed(name.split(":", 1)[1]))
        else:
            _DATA[name] = build_all()[name].read_bytes()
    return _DATA[name]


def _names_or_error(reader, data: bytes) -> ElfNames | str:  # type: ignore[no-untyped-def]
    try:
        return reader(data, "fuzz.so")
    except ElfFormatError as exc:
        assert exc.location == "fuzz.so"
        assert exc.message and "\n" not in exc.message
        return exc.message


def must_not_crash(data: bytes) -> ElfImage | ElfFormatError:
    """read_elf gives an image or one error line; so does the names-only view (behind
    `shimkit symbols`), the same with the compiled names module and without it: the same
    names, or the same error message."""
    names = _names_or_error(read_elf_names, data)
    assert names == _names_or_error(read_elf_names, memoryview(data))
    with python_only():  # the compiled module's answer (when it took the table) is Python's
        assert names == _names_or_error(read_elf_names, data)
    try:
        image = read_elf(data, "fuzz.so")
    except ElfFormatError as exc:
        assert exc.location == "fuzz.so"
        assert exc.message and "\n" not in exc.message
        return exc
    assert isinstance(image, ElfImage)
    assert all(isinstance(s.name, str) for s in image.imports + image.exports)
    if isinstance(names, ElfNames):  # the names view is the full read's names
        assert names.imports == sorted({s.name for s in image.imports})
        assert names.exports == sorted({s.name for s in image.exports})
    return image


@FUZZ
@given(
    name=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=24),
)
def test_random_byte_mutations(name: str, edits: list[tuple[int, int]]) -> None:
    data = bytearray(seed(name))
    for pos, value in edits:
        data[pos % len(data)] = value
    must_not_crash(bytes(data))


@FUZZ
@given(name=st.sampled_from(SEEDS), cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncations(name: str, cut: float) -> None:
    data = seed(name)
    size = int(len(data) * cut)
    result = must_not_crash(data[:size])
    if size < len(data) and isinstance(result, ElfImage):
        # A shortened image can only read if nothing it declares was cut off.
        assert parse_layout(data[:size]).extent <= size


_HUGE = st.sampled_from([0, 1, 0x7F, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF])
_FIELDS = ["offset", "size", "link", "info", "entsize", "name", "type"]
_SHDR = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}  # one code per Section field


@FUZZ
@given(
    name=st.sampled_from(SECTIONED),
    section=st.integers(0, 40),
    field=st.sampled_from(_FIELDS),
    value=_HUGE,
)
def test_huge_counts_and_bad_offsets_in_section_headers(
    name: str, section: int, field: str, value: int
) -> None:
    data = bytearray(seed(name))
    layout = parse_layout(data)
    index = section % max(len(layout.sections), 1)
    codes = _SHDR[layout.elf_class]
    shdr = struct.Struct(layout.endian + codes)
    position = Section._fields.index(field)
    limit = (1 << (8 * struct.calcsize("=" + codes[position]))) - 1
    row = list(layout.sections[index])
    row[position] = value & limit
    shdr.pack_into(data, layout.shoff + index * shdr.size, *row)
    must_not_crash(bytes(data))


@FUZZ
@given(
    name=st.sampled_from(SEEDS),
    offset=st.sampled_from([16, 18, 20, 24, 28, 32, 40, 44, 46, 48, 50, 52, 56, 58, 60, 62]),
    value=_HUGE,
    width=st.sampled_from([2, 4]),
)
def test_bad_file_header_fields(name: str, offset: int, value: int, width: int) -> None:
    data = bytearray(seed(name))
    endian = "<" if data[5] == 1 else ">"
    fmt = endian + ("H" if width == 2 else "I")
    struct.pack_into(fmt, data, offset, value & ((1 << (8 * width)) - 1))
    must_not_crash(bytes(data))


@FUZZ
@given(
    name=st.sampled_from(SECTIONED),
    symbol=st.integers(1, 60),
    value=st.sampled_from([0x7FFFFFFF, 0xFFFFFFFF, 0x10000]),
)
def test_symbol_name_offsets_past_the_string_table(name: str, symbol: int, value: int) -> None:
    data = bytearray(seed(name))
    layout = parse_layout(data)
    tables = layout.sections_of_type(SHT_DYNSYM) or layout.sections_of_type(SHT_SYMTAB)
    sec = layout.sections[tables[0]]
    size = 16 if layout.elf_class == 1 else 24
    count = sec.size // size
    pos = sec.offset + (symbol % count) * size
    struct.pack_into(layout.endian + "I", data, pos, value)
    result = must_not_crash(bytes(data))
    if symbol % count:
        assert isinstance(result, ElfFormatError)
        assert "past the end of its string table" in result.message


@FUZZ
@given(
    name=st.sampled_from(CONTAINERS),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=16),
    cut=st.floats(min_value=0.05, max_value=1.0),
)
def test_containers_never_raise(name: str, edits: list[tuple[int, int]], cut: float) -> None:
    data = bytearray(seed(name))
    for pos, value in edits:
        data[pos % len(data)] = value
    data = data[: max(int(len(data) * cut), 1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(bytes(data))
        for item in iter_images([path]):
            assert isinstance(item, ElfImage | InputError)
            if isinstance(item, InputError):
                assert item.message and "\n" not in item.message
        for named in iter_names([path]):
            assert isinstance(named, ElfNames | InputError)
            if isinstance(named, InputError):
                assert named.message and "\n" not in named.message


@pytest.mark.parametrize("name", SEEDS)
def test_unmutated_seeds_read(name: str) -> None:
    """Positive control for the properties above: the seeds themselves read cleanly."""
    assert isinstance(must_not_crash(seed(name)), ElfImage)


def _naive_string(strtab: bytes, offset: int) -> str:
    end = strtab.find(b"\0", offset)
    return strtab[offset : end if end >= 0 else len(strtab)].decode("utf-8", "surrogateescape")


@FUZZ
@given(
    strtab=st.lists(
        st.binary(max_size=12) | st.sampled_from([b"", b"abc", b"_Z3foo", b"\xff\xfe", b'"\\']),
        max_size=40,
    ).map(b"\0".join),
    picks=st.lists(st.integers(min_value=0), max_size=60),
    repeat=st.booleans(),
    at_starts=st.booleans(),
)
def test_string_table_lookup_equals_slicing(
    strtab: bytes, picks: list[int], repeat: bool, at_starts: bool
) -> None:
    """Offsets at string starts only or also inside strings (shared tails), repeated, at a
    trailing string without NUL, ASCII or not: the split-once lookup equals slicing."""
    if not strtab:
        return
    offsets = [p % len(strtab) for p in picks]
    if at_starts:
        starts = [0, *(i + 1 for i, byte in enumerate(strtab[:-1]) if byte == 0)]
        offsets = [starts[p % len(starts)] for p in picks]
    if not repeat:
        offsets = list(dict.fromkeys(offsets))
    want = sorted(_naive_string(strtab, o) for o in offsets)
    assert sorted(StringTable(strtab).names(offsets)) == want
    padded = StringTable(strtab + b"\0" * 4096)  # few names for its size: the slicing path
    assert sorted(padded.names(offsets)) == want


def test_string_table_negative_control() -> None:
    """The comparison above can fail: a tail-merged offset is not its whole string."""
    table = StringTable(b"\0aoti_torch_x\0")
    assert table.names([1]) == ["aoti_torch_x"]
    assert table.names([6]) == ["torch_x"] != ["aoti_torch_x"]
