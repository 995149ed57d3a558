"""Relocations (what shimkit.runtime.bindings reads) equal pyelftools', entry by entry."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from shimkit.elf import ElfFormatError
from shimkit.elf.layout import parse_layout
from shimkit.elf.relocations import SHT_RELA, Relocation, read_relocations

from tests.elf.common import SYSTEM_SAMPLE, system_library, torch_small_libs

FIXTURES = ["blob_unprefixed.so", "blob_prefixed.so", "shim_prefixed.so", "prog"]


def reference(path: Path) -> list[Relocation]:
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        found = []
        for section in elf.iter_sections():
            if not isinstance(section, RelocationSection):
                continue
            symtab = elf.get_section(section["sh_link"])
            for reloc in section.iter_relocations():
                index = reloc["r_info_sym"]
                name = symtab.get_symbol(index).name if index else ""
                name = name.encode("latin-1").decode("utf-8", "surrogateescape")
                found.append(Relocation(reloc["r_offset"], reloc["r_info_type"], name))
        return found


def check(path: Path) -> None:
    ours = read_relocations(path.read_bytes(), str(path))
    assert ours.entries == reference(path)
    assert ours.entries  # positive: real files have relocations


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_relocations_equal_pyelftools(elf_fixtures: dict[str, Path], name: str) -> None:
    check(elf_fixtures[name])


def test_an_image_without_relocations(elf_fixtures: dict[str, Path]) -> None:
    found = read_relocations(elf_fixtures["be64_blob.so"].read_bytes(), "be64_blob.so")
    assert found.entries == reference(elf_fixtures["be64_blob.so"]) == []


@pytest.mark.parametrize("name", SYSTEM_SAMPLE)
def test_system_library_relocations_equal_pyelftools(name: str) -> None:
    check(system_library(name))


@pytest.mark.parametrize("path", torch_small_libs()[:4], ids=lambda p: p.name)
def test_torch_library_relocations_equal_pyelftools(path: Path) -> None:
    check(path)


def test_a_bad_symbol_index_is_one_error_line(elf_fixtures: dict[str, Path]) -> None:
    """Negative control: a relocation naming a symbol past its table is an ElfFormatError
    (and the comparison above would catch a wrong index: the names differ)."""
    data = bytearray(elf_fixtures["blob_unprefixed.so"].read_bytes())
    layout = parse_layout(data)
    rela = next(s for s in layout.sections if s.type == SHT_RELA and s.size)
    struct.pack_into("<I", data, rela.offset + 12, 0xFFFF)  # r_info's symbol half
    with pytest.raises(ElfFormatError, match="symbol index past its table"):
        read_relocations(bytes(data), "bad.so")
