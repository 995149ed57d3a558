"""The reader equals pyelftools' own parse, symbol by symbol (pyelftools is the oracle)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shimkit.elf import read_elf, read_elf_names

from tests.elf.common import SYSTEM_SAMPLE, python_only, system_library, torch_small_libs
from tests.elf.reference import reference_structure, reference_symbols
from tests.fixtures.build import FIXTURES

ELF_NAMES = [n for n in FIXTURES if not n.endswith((".a", ".pt2", ".pte", ".bin"))]


def rows(symbols: list) -> list[tuple]:
    return [(s.name, s.version, s.binding, s.type, s.defined) for s in symbols]


def check(path: Path) -> None:
    table, imports, exports = reference_symbols(path)
    data = path.read_bytes()
    image = read_elf(data, str(path))
    assert image.symbol_table == table
    assert rows(image.imports) == imports
    assert rows(image.exports) == exports
    names = read_elf_names(data, str(path))  # the names-only view behind `shimkit symbols`
    assert names.imports == sorted({r[0] for r in imports})
    assert names.exports == sorted({r[0] for r in exports})
    assert names.symbol_table == table
    assert names == read_elf_names(memoryview(data), str(path))
    with python_only():
        assert names == read_elf_names(data, str(path))
    needed, soname, machine = reference_structure(path)
    assert (image.needed, image.soname, image.machine) == (needed, soname, machine)
    assert (names.needed, names.soname, names.machine) == (needed, soname, machine)


@pytest.mark.parametrize("name", ELF_NAMES)
def test_fixture_equals_pyelftools(elf_fixtures: dict[str, Path], name: str) -> None:
    check(elf_fixtures[name])


@pytest.mark.parametrize("name", SYSTEM_SAMPLE)
def test_system_library_equals_pyelftools(name: str) -> None:
    check(system_library(name))


def test_machine_table_agrees_with_pyelftools() -> None:
    from elftools.elf.enums import ENUM_E_MACHINE
    from shimkit.elf.layout import MACHINES, machine_name

    for value, name in MACHINES.items():
        assert ENUM_E_MACHINE[name] == value
    assert machine_name(0xB7) == "EM_AARCH64"
    assert machine_name(90) == "EM_90"  # not in the table: named by number


@pytest.mark.parametrize("path", torch_small_libs(), ids=lambda p: p.name)
def test_torch_library_equals_pyelftools(path: Path) -> None:
    check(path)
