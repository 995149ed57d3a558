"""Less common but legal layouts: extended section numbering, BSD and thin archives."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from shimkit.elf import InputError, read_elf
from shimkit.elf.layout import parse_layout
from shimkit.inputs import iter_images

from tests.fixtures.elfwriter import ElfSpec, WSym, write_elf


def _spec() -> ElfSpec:
    return ElfSpec(
        elf_class=64,
        little_endian=True,
        machine="EM_X86_64",
        symbols=[WSym("aoti_torch_get_dim", defined=False), WSym("exported", defined=True)],
        needed=["libc.so.6"],
    )


def test_extended_section_numbering() -> None:
    """e_shnum == 0 and e_shstrndx == SHN_XINDEX: the real values live in section 0."""
    data = bytearray(write_elf(_spec()))
    layout = parse_layout(data)
    count, shstrndx = len(layout.sections), layout.shstrndx
    struct.pack_into("<HH", data, 60, 0, 0xFFFF)  # e_shnum, e_shstrndx
    struct.pack_into("<Q", data, layout.shoff + 32, count)  # section 0 sh_size
    struct.pack_into("<I", data, layout.shoff + 40, shstrndx)  # section 0 sh_link
    image = read_elf(bytes(data), "ext.so")
    assert [s.name for s in image.imports] == ["aoti_torch_get_dim"]
    assert [s.name for s in image.exports] == ["exported"]
    assert image.needed == ["libc.so.6"]
    reference = read_elf(write_elf(_spec()), "plain.so")
    assert (image.imports, image.exports) == (reference.imports, reference.exports)


def _ar_member(name: bytes, body: bytes) -> bytes:
    header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
    header += str(len(body)).encode().ljust(10) + b"`\n"
    return header + body + (b"\n" if len(body) % 2 else b"")


def test_bsd_archive_names(tmp_path: Path) -> None:
    obj = write_elf(ElfSpec(e_type="REL", symbols=[WSym("aoti_torch_x", defined=False)]))
    long_name = b"a_very_long_bsd_member_name.o"
    archive = b"!<arch>\n" + _ar_member(b"__.SYMDEF", b"\0" * 8)
    archive += _ar_member(b"#1/" + str(len(long_name)).encode(), long_name + obj)
    archive += _ar_member(b"short.o/", obj)
    path = tmp_path / "bsd.a"
    path.write_bytes(archive)
    results = list(iter_images([path]))
    assert [r.location for r in results] == [
        f"{path}!a_very_long_bsd_member_name.o",
        f"{path}!short.o",
    ]
    assert all(not isinstance(r, InputError) for r in results)
    assert [s.name for s in results[0].imports] == ["aoti_torch_x"]  # type: ignore[union-attr]


def test_duplicate_member_names_stay_distinct(tmp_path: Path) -> None:
    obj = write_elf(ElfSpec(e_type="REL", symbols=[WSym("f", defined=True)]))
    path = tmp_path / "dup.a"
    path.write_bytes(b"!<arch>\n" + _ar_member(b"x.o/", obj) + _ar_member(b"x.o/", obj))
    assert [r.location for r in iter_images([path])] == [f"{path}!x.o", f"{path}!x.o#2"]


def test_thin_archive_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "thin.a"
    path.write_bytes(b"!<thin>\n" + _ar_member(b"x.o/", b""))
    results = list(iter_images([path]))
    assert len(results) == 1 and isinstance(results[0], InputError)
    assert "thin archive" in results[0].message


def test_version_chains_are_bounded() -> None:
    """Counts that cannot fit, chains that run off their section and bad name offsets are
    one-line errors; a chain ended early by a zero `next` is read as far as it goes."""
    from shimkit.elf.layout import MalformedElf
    from shimkit.elf.versions import VersionChain, version_names

    strtab = b"\0libc.so.6\0GLIBC_2.2\0"

    def chain(size: int, count: int) -> VersionChain:
        return VersionChain(0, size, count, strtab, needed=True)

    aux = struct.pack("<IHHII", 0, 0, 2, 11, 0)  # vna_other 2, vna_name "GLIBC_2.2"
    entry = struct.pack("<HHIII", 1, 1, 1, 16, 0)  # one aux at +16, no next entry
    ok = {2: "GLIBC_2.2"}
    assert version_names(entry + aux, chain(32, 1), "<") == ok
    # vn_cnt says 60000 auxiliaries but vna_next is 0: stop, do not re-read the same entry.
    many = struct.pack("<HHIII", 1, 60000, 1, 16, 0) + aux
    assert version_names(many, chain(32, 1), "<") == ok
    with pytest.raises(MalformedElf, match="cannot fit"):
        version_names(entry + aux, chain(32, 1000), "<")
    onward = struct.pack("<IHHII", 0, 0, 2, 11, 16)  # vna_next always +16: off the end
    runaway = struct.pack("<HHIII", 1, 60000, 1, 16, 0) + onward + onward
    with pytest.raises(MalformedElf, match="past its section"):
        version_names(runaway, chain(48, 1), "<")
    bad_name = struct.pack("<IHHII", 0, 0, 2, 999, 0)
    with pytest.raises(MalformedElf, match="past its string table"):
        version_names(entry + bad_name, chain(32, 1), "<")


def _strip_section_headers(data: bytes) -> bytes:
    layout = parse_layout(data)
    out = bytearray(data)
    endian = "<" if layout.little_endian else ">"
    if layout.elf_class == 2:
        struct.pack_into(endian + "Q", out, 0x28, 0)  # e_shoff
        struct.pack_into(endian + "HH", out, 0x3C, 0, 0)  # e_shnum, e_shstrndx
    else:
        struct.pack_into(endian + "I", out, 0x20, 0)
        struct.pack_into(endian + "HH", out, 0x30, 0, 0)
    return bytes(out)


@pytest.mark.parametrize(
    "name",
    [
        "blob_unprefixed.so",
        "blob_prefixed.so",
        "shim_unprefixed.so",
        "blob_c10.so",
        "blob_unprefixed_32.so",
        "prog",
        "prog_nopie",
    ],
)
def test_no_section_headers_reads_dynsym_like_the_loader(name: str) -> None:
    """Without section headers (sstrip), .dynsym is found through PT_DYNAMIC and the GNU hash
    table, exactly as with them: the loader binds those symbols, so the linter must see them."""
    from tests.fixtures.build import fixture_path

    data = fixture_path(name).read_bytes()
    full = read_elf(data, name)
    stripped = read_elf(_strip_section_headers(data), name)
    assert stripped.symbol_table == ".dynsym"
    assert stripped.imports == full.imports
    assert stripped.exports == full.exports
    assert stripped.symbol_count == full.symbol_count
    assert (stripped.needed, stripped.soname) == (full.needed, full.soname)
    assert stripped.warnings == ["no section headers: .dynsym read through PT_DYNAMIC"]
    assert full.warnings == []


def test_no_section_headers_on_system_libraries() -> None:
    """Same on real libraries (versioned symbols, DT_GNU_HASH with many buckets)."""
    for lib in ("libc.so.6", "libstdc++.so.6", "libz.so.1"):
        path = Path("/usr/lib/x86_64-linux-gnu") / lib
        if not path.exists():
            continue
        data = path.read_bytes()
        full = read_elf(data, lib)
        stripped = read_elf(_strip_section_headers(data), lib)
        assert (stripped.imports, stripped.exports) == (full.imports, full.exports), lib
