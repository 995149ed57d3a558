"""The ELF reader's compiled names module (shimkit.elf._symnames, _symnames.c).

- It is built with the package (pyproject declares it), compiles without warnings,
  and is used on this machine; SHIMKIT_ELF_ACCEL=0 turns it off.
- Compiled == Python on real files: libtorch_cpu.so, system libraries and the gcc-built
  fixtures, as ElfNames and as `shimkit symbols` output (JSON and text); a corrupted
  module (a sort bug, a lost name) is caught by that comparison (negative control).
- The C function against a Python model of it, on random tables and on random bytes
  with random offsets and sizes (never a crash: None or the model's answer). The ELF
  fuzz tests (test_fuzz.py) compare both paths on mutated files too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shimkit.commands import symbols_cmd
from shimkit.elf import read_elf_names, symtab
from shimkit.elf.layout import MalformedElf
from shimkit.elf.symtab import StringTable

from tests.elf.common import FUZZ, SYSTEM, python_only

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "lint" / "shimkit" / "elf" / "_symnames.c"

SYSTEM_LIBS = ["libc.so.6", "libstdc++.so.6", "libm.so.6", "libz.so.1", "libcrypto.so.3"]
FIXTURES = [
    "blob_unprefixed.so", "blob_prefixed.so", "shim_prefixed.so", "blob_c10.so",
    "blob_unprefixed.o", "blob_unprefixed_32.so", "shim_prefixed_32.so", "be64_blob.so",
    "be32_blob.so", "be64_blob.o", "prog", "prog_nopie", "fake_torch/libtorch_cpu.so",
]  # fmt: skip


def compiled() -> ModuleType:
    module = symtab.accelerator()
    assert module is not None, "shimkit.elf._symnames is not built: run `make setup`"
    return module


def _torch_lib() -> Path:
    import torch

    return Path(torch.__file__).parent / "lib"


def real_files(elf_fixtures: dict[str, Path]) -> list[Path]:
    files = [_torch_lib() / "libtorch_cpu.so", _torch_lib() / "libc10.so"]
    files += [SYSTEM / name for name in SYSTEM_LIBS]
    files += [elf_fixtures[name] for name in FIXTURES]
    return [f for f in files if f.is_file()]


def _symbols_output(paths: list[Path], fmt: str) -> str:
    artifacts, errors = symbols_cmd.collect([str(p) for p in paths])
    if fmt == "json":
        return symbols_cmd.render_json(artifacts, errors)
    return symbols_cmd.render_text(artifacts)


def differences(path: Path) -> list[str]:
    """How the compiled path's answer for `path` differs from the Python one."""
    data = path.read_bytes()
    problems = []
    fast = read_elf_names(data, str(path))
    fast_json = _symbols_output([path], "json")
    with python_only():
        slow = read_elf_names(data, str(path))
        slow_json = _symbols_output([path], "json")
    if fast != slow:
        problems.append(f"{path}: ElfNames differ")
    if fast_json != slow_json:
        problems.append(f"{path}: `shimkit symbols --format json` output differs")
    return problems


def test_module_is_built_used_and_can_be_turned_off(elf_fixtures: dict[str, Path]) -> None:
    module = compiled()
    # Built from SOURCE beside the package's Python (in the checkout, or in site-packages
    # for an editable install), not a stale copy elsewhere.
    assert module.__name__ == "shimkit.elf._symnames"
    assert Path(module.__file__).parent.parts[-2:] == ("shimkit", "elf")
    with python_only():
        assert symtab.accelerator() is None
    calls: list[object] = []
    path = elf_fixtures["blob_unprefixed.so"]

    def counting(*args: object) -> object:
        calls.append(args)
        return module.sorted_names(*args)

    spy = SimpleNamespace(sorted_names=counting)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(symtab, "_accelerator", spy)
        assert "aoti_torch_get_dim" in read_elf_names(path.read_bytes(), str(path)).imports
        assert len(calls) == 1
        with python_only():
            read_elf_names(path.read_bytes(), str(path))
        assert len(calls) == 1  # off: not called


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_source_compiles_without_warnings(tmp_path: Path) -> None:
    include = sysconfig.get_paths()["include"]
    flags = ["-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror"]
    proc = subprocess.run(
        ["gcc", *flags, "-I", include, str(SOURCE), "-o", str(tmp_path / "x.so")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_package_build_declares_it() -> None:
    """`pip install`/`pip wheel`/`pip install -e` build the module (CMake over
    native_sources.bzl, the one description of the native build) into its package."""
    sys.path.insert(0, str(ROOT / "tools"))
    import native_sources

    extension = native_sources.load().python_extensions["_symnames"]
    assert extension["srcs"] == [SOURCE.relative_to(ROOT).as_posix()]
    assert extension["package"] == "shimkit.elf"


def test_compiled_equals_python_on_real_files(elf_fixtures: dict[str, Path]) -> None:
    compiled()
    files = real_files(elf_fixtures)
    assert len(files) >= 15
    assert [p for f in files for p in differences(f)] == []


def test_symbols_text_and_json_equal_both_ways(elf_fixtures: dict[str, Path]) -> None:
    compiled()
    paths = [elf_fixtures[n] for n in ["libblobs.a", "model.pt2", "model.pte"]]
    paths += [SYSTEM / "libc.so.6"]
    fast = [_symbols_output(paths, fmt) for fmt in ("json", "text")]
    with python_only():
        slow = [_symbols_output(paths, fmt) for fmt in ("json", "text")]
    assert fast == slow


@pytest.mark.parametrize("how", ["swap", "drop"])
def test_a_corrupted_module_is_detected(elf_fixtures: dict[str, Path], how: str) -> None:
    """Negative control: a module that swaps two neighbouring exports (a sort bug) or
    drops the last one must make the comparison above fail."""
    real = compiled()

    def sorted_names(*args: object) -> object:
        found = real.sorted_names(*args)
        if found is None:
            return None
        imports, exports = found
        exports = list(exports)
        if how == "swap":
            exports[0], exports[1] = exports[1], exports[0]
        else:
            exports.pop()
        return imports, exports

    path = elf_fixtures["shim_prefixed.so"]
    assert differences(path) == []  # positive control
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(symtab, "_accelerator", SimpleNamespace(sorted_names=sorted_names))
        problems = differences(path)
    assert any("ElfNames differ" in p for p in problems), problems
    assert any("output differs" in p for p in problems), problems


# ---- the C function against a Python model of it --------------------------------------


def model(
    buf: bytes, sym_off: int, sym_size: int, str_off: int, str_size: int, is64: bool, little: bool
) -> tuple[list[str], list[str]] | None:
    """What sorted_names returns, as documented in _symnames.c."""
    size, ent = len(buf), (24 if is64 else 16)
    if (
        sym_off > size
        or sym_size > size - sym_off
        or str_off > size
        or str_size > size - str_off
        or sym_size % ent
        or str_size == 0
    ):
        return None
    table = buf[str_off : str_off + str_size]
    lists: tuple[list[bytes], list[bytes]] = ([], [])
    spent = 0
    for i in range(1, sym_size // ent):
        e = buf[sym_off + i * ent : sym_off + (i + 1) * ent]
        st_name = int.from_bytes(e[:4], "little" if little else "big")
        if st_name >= str_size:
            return None
        info, shndx = (e[4], e[6:8]) if is64 else (e[12], e[14:16])
        defined = shndx != b"\0\0"
        if defined and info >> 4 == 0:
            continue
        name = table[st_name:].split(b"\0", 1)[0]
        if not defined and not name:
            continue
        spent += len(name)
        if spent > 8 * str_size + (1 << 20) or any(b >= 0x80 for b in name):
            return None
        lists[1 if defined else 0].append(name)
    imports, exports = (sorted({n.decode("ascii") for n in names}) for names in lists)
    return imports, exports


_ALPHABET = [b"_Z", b"N3", b"at", b"_ZN2at6native", b"a", b"b", b"", b'"', b"\\", b"\x01", b"\xc3"]


@st.composite
def tables(draw: st.DrawFn) -> tuple[bytes, int, int, int, int, bool, bool]:
    """A symbol table and a string table (names sharing long prefixes, repeated, shared
    tails, one without NUL at the end), laid out in one buffer with some slack. Mostly
    tables the module takes (ASCII, offsets inside the table), big enough to be sorted
    by partitioning; sometimes a non-ASCII name or an offset past the table."""
    is64, little = draw(st.booleans()), draw(st.booleans())
    names = draw(
        st.lists(st.lists(st.sampled_from(_ALPHABET), max_size=12).map(b"".join), max_size=80)
    )
    if draw(st.integers(0, 4)):
        names = [n.replace(b"\xc3", b"c") for n in names]
    strtab = b"\0" + b"\0".join(names) + (b"" if draw(st.booleans()) else b"\0")
    past_end = draw(st.integers(0, 9)) == 0
    ent = 24 if is64 else 16
    order = "little" if little else "big"
    at_info, at_shndx = (4, 6) if is64 else (12, 14)
    rows = []
    for _ in range(draw(st.integers(0, 20) | st.integers(20, 300))):
        limit = len(strtab) + (2 if past_end else 0)
        offset = draw(st.integers(0, limit - 1))
        row = bytearray(ent)
        row[0:4] = offset.to_bytes(4, order)
        row[at_info] = draw(st.sampled_from([0x12, 0x22, 0x11, 0xA2, 0x00, 0x02]))
        shndx = draw(st.sampled_from([1, 12, 0xFFF1, 0x0100, 0, 0]))
        row[at_shndx : at_shndx + 2] = shndx.to_bytes(2, order)
        rows.append(bytes(row))
    symtab_bytes = bytes(ent) + b"".join(rows)
    slack = draw(st.binary(max_size=8))
    buf = slack + symtab_bytes + strtab + slack
    return (
        buf,
        len(slack),
        len(symtab_bytes),
        len(slack) + len(symtab_bytes),
        len(strtab),
        is64,
        little,
    )


@FUZZ
@given(case=tables())
def test_c_function_equals_its_model_on_random_tables(
    case: tuple[bytes, int, int, int, int, bool, bool],
) -> None:
    buf, *args = case
    want = model(buf, *args)  # type: ignore[arg-type]
    assert compiled().sorted_names(buf, *args) == want
    assert compiled().sorted_names(memoryview(buf), *args) == want


_SIZES = st.integers(0, 700) | st.sampled_from([2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1])


@FUZZ
@given(
    buf=st.binary(max_size=600),
    sym_off=_SIZES,
    sym_size=_SIZES,
    str_off=_SIZES,
    str_size=_SIZES,
    is64=st.booleans(),
    little=st.booleans(),
)
def test_c_function_never_reads_out_of_bounds(
    buf: bytes, sym_off: int, sym_size: int, str_off: int, str_size: int, is64: bool, little: bool
) -> None:
    """Random bytes, offsets and sizes (also past the buffer and 2**64 - 1): None or the
    model's answer, never a crash."""
    args = (sym_off, sym_size, str_off, str_size, is64, little)
    assert compiled().sorted_names(buf, *args) == model(buf, *args)


def _table(offsets: list[int], strtab: bytes) -> tuple[bytes, tuple[int, int, int, int, int, int]]:
    """A little-endian ELF64 symbol table of exported FUNCs naming `offsets`, then `strtab`."""
    rows = b"".join(
        o.to_bytes(4, "little") + bytes([0x12, 0]) + (1).to_bytes(2, "little") + bytes(16)
        for o in offsets
    )
    buf = bytes(24) + rows + strtab
    return buf, (0, 24 + len(rows), 24 + len(rows), len(strtab), 1, 1)


def test_c_function_sorts_big_tables_like_python() -> None:
    """Thousands of names with long shared prefixes (several 8-byte keys deep), repeats,
    one string named by many symbols, names ending inside a key: Python's order."""
    import random

    rng = random.Random(7)
    stems = [b"_ZN2at6native", b"_ZN5torch3jit", b"_ZNK3c1010TensorImpl", b"x" * 40]
    names = [
        rng.choice(stems) + bytes(rng.choice(b"abcdefgh") for _ in range(rng.randint(0, 20)))
        for _ in range(5000)
    ]
    strtab = b"\0" + b"\0".join(names) + b"\0"
    starts = [0]
    for name in names:
        starts.append(starts[-1] + len(name) + 1)
    offsets = [s + 1 for s in starts[:-1]]
    offsets += [offsets[0]] * 300  # one entry, many symbols
    offsets += [o + 3 for o in offsets[:500]]  # shared tails
    buf, args = _table(offsets, strtab)
    found = compiled().sorted_names(buf, *args)
    assert found == model(buf, *args)
    assert found is not None and found[1] == sorted(
        {n.decode() for n in names} | {n[3:].decode() for n in names[:500]}
    )


def test_huge_overlapping_names_are_an_error_not_a_memory_blow_up() -> None:
    """Many symbols naming one long string at different offsets (a hostile file: far more
    bytes of names than the table holds): the module declines, the Python reader says
    what is wrong. Positive control: as many symbols naming the string's start are fine
    (one name, kept once)."""
    strtab = b"\0" + b"a" * 300_000 + b"\0"
    buf, args = _table([1 + i for i in range(3000)], strtab)
    assert compiled().sorted_names(buf, *args) is None
    with pytest.raises(MalformedElf, match="overlap"):
        StringTable(strtab).names([1 + i for i in range(3000)])
    same, same_args = _table([1] * 3000, strtab)
    assert compiled().sorted_names(same, *same_args) is None  # over the budget: declined...
    assert StringTable(strtab).names([1] * 3000) == ["a" * 300_000] * 3000  # ...Python: shared


@pytest.mark.parametrize("padding", [0, 100_000])
def test_string_table_output_is_shared_not_copied(padding: int) -> None:
    """The Python path keeps one str per offset, whatever the number of symbols naming it
    (split table, and few names for a big table: sliced)."""
    table = StringTable(b"\0" + b"b" * 1000 + b"\0" * (1 + padding))
    found = table.names([1] * 100 + [2] * 100)
    assert len({id(name) for name in found}) == 2


def test_text_output_of_a_non_ascii_name_goes_through_python(tmp_path: Path) -> None:
    """A name that is not ASCII: the module declines, Python decodes (surrogateescape)."""
    from tests.fixtures.elfwriter import ElfSpec, WSym, write_elf

    data = write_elf(ElfSpec(symbols=[WSym("aoti_torch_x", defined=True)]))
    data = data.replace(b"aoti_torch_x", b"aoti_torch\xffx")
    image = read_elf_names(data, "weird.so")
    assert image.exports == ["aoti_torch\udcffx"]
    with python_only():
        assert read_elf_names(data, "weird.so") == image
