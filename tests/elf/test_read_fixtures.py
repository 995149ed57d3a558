"""read_elf on every fixture: the facts each lint rule depends on."""

from __future__ import annotations

from pathlib import Path

import pytest
from shimkit.config import ShimConfig
from shimkit.elf import ElfFormatError, ElfImage, read_elf

from tests.fixtures.build import FIXTURES, PT2_BLOB_MEMBER, PTE_BLOB_OFFSET

ELF_NAMES = [
    n for n in FIXTURES if not n.endswith((".a", ".pt2", ".pte", ".bin"))
]  # plain ELF files


def read(path: Path) -> ElfImage:
    return read_elf(path.read_bytes(), str(path))


def names(symbols: list) -> set[str]:
    return {s.name for s in symbols}


@pytest.mark.parametrize("name", ELF_NAMES)
def test_every_plain_fixture_reads(elf_fixtures: dict[str, Path], name: str) -> None:
    image = read(elf_fixtures[name])
    assert image.has_symbols
    assert image.imports == sorted(image.imports, key=lambda s: (s.name, s.version or ""))
    assert image.exports == sorted(image.exports, key=lambda s: (s.name, s.version or ""))
    assert all(not s.defined for s in image.imports)
    assert all(s.defined and s.binding != "LOCAL" for s in image.exports)
    assert image.size == elf_fixtures[name].stat().st_size


def test_unprefixed_blob(elf_fixtures: dict[str, Path], config: ShimConfig) -> None:
    image = read(elf_fixtures["blob_unprefixed.so"])
    assert (image.elf_class, image.little_endian, image.e_type) == (64, True, "DYN")
    assert image.machine == "EM_X86_64"
    shims = {s.name: s for s in image.imports if config.is_family(s.name)}
    assert set(shims) == {
        "aoti_torch_get_dim",
        "aoti_torch_get_data_ptr",
        "aoti_torch_grad_mode_is_enabled",
    }
    assert shims["aoti_torch_grad_mode_is_enabled"].binding == "WEAK"
    assert shims["aoti_torch_get_dim"].binding == "GLOBAL"
    assert shims["aoti_torch_get_dim"].type == "NOTYPE"  # ld writes undefined as NOTYPE
    entry = [s for s in image.exports if s.name == "AOTInductorModelContainerRun"]
    assert entry[0].type == "FUNC" and entry[0].binding == "GLOBAL"
    assert "AOTInductorModelContainerCreateWithDevice" in names(image.exports)
    assert image.exec_stack is False
    assert image.needed == []  # it uses nothing from libc


def test_prefixed_blob_is_the_negative_control(
    elf_fixtures: dict[str, Path], config: ShimConfig
) -> None:
    image = read(elf_fixtures["blob_prefixed.so"])
    assert not any(config.is_family(s.name) for s in image.imports)
    prefixed = {s.name for s in image.imports if config.is_prefixed_family(s.name)}
    assert prefixed == {config.prefixed("aoti_torch_get_dim"),
                        config.prefixed("aoti_torch_get_data_ptr"),
                        config.prefixed("aoti_torch_grad_mode_is_enabled")}  # fmt: skip


def test_shim_libraries(elf_fixtures: dict[str, Path], config: ShimConfig) -> None:
    unprefixed = read(elf_fixtures["shim_unprefixed.so"])
    prefixed = read(elf_fixtures["shim_prefixed.so"])
    assert {"aoti_torch_get_dim", "torch_get_num_threads"} <= names(unprefixed.exports)
    assert not any(config.is_family(s.name) for s in prefixed.exports)
    assert config.prefixed("torch_get_num_threads") in names(prefixed.exports)


def test_needed_soname_execstack_c10_proxy_entry(
    elf_fixtures: dict[str, Path], config: ShimConfig
) -> None:
    assert read(elf_fixtures["blob_needs_libtorch.so"]).needed[0] == "libtorch_cpu.so"
    assert read(elf_fixtures["fake_torch/libtorch_cpu.so"]).soname == "libtorch_cpu.so"
    assert read(elf_fixtures["blob_execstack.so"]).exec_stack is True
    assert read(elf_fixtures["blob_prefixed.so"]).exec_stack is False
    c10 = read(elf_fixtures["blob_c10.so"])
    assert "_ZN3c1012show_warningEPKc" in names(c10.imports)
    proxy = read(elf_fixtures["blob_proxy.so"])
    assert config.prefixed("aoti_torch_proxy_executor_call_function") in names(proxy.imports)
    no_entry = read(elf_fixtures["blob_no_entry.so"])
    assert not any(n.startswith("AOTInductorModelContainer") for n in names(no_entry.exports))


def test_relocatable_objects(elf_fixtures: dict[str, Path]) -> None:
    obj = read(elf_fixtures["blob_unprefixed.o"])
    assert obj.e_type == "REL" and obj.symbol_table == ".symtab"
    assert "aoti_torch_get_dim" in names(obj.imports)
    assert "AOTInductorModelContainerRun" in names(obj.exports)
    assert "run_kernel" not in names(obj.exports)  # static: local
    assert obj.exec_stack is False
    assert obj.needed == [] and obj.soname is None
    assert read(elf_fixtures["blob_no_gnu_stack.o"]).exec_stack is True


def test_executables(elf_fixtures: dict[str, Path]) -> None:
    pie = read(elf_fixtures["prog"])
    nopie = read(elf_fixtures["prog_nopie"])
    assert pie.e_type == "DYN" and nopie.e_type == "EXEC"
    for image in (pie, nopie):
        puts = [s for s in image.imports if s.name == "puts"]
        assert puts and puts[0].version == "GLIBC_2.2.5"
        assert image.needed == ["libc.so.6"]
        assert image.exec_stack is False


@pytest.mark.parametrize(
    ("name", "elf_class", "machine"),
    [
        ("blob_unprefixed_32.so", 32, "EM_386"),
        ("shim_prefixed_32.so", 32, "EM_386"),
        ("be64_blob.so", 64, "EM_S390"),
        ("be32_blob.so", 32, "EM_PPC"),
        ("be64_blob.o", 64, "EM_S390"),
    ],
)
def test_other_classes_and_endianness(
    elf_fixtures: dict[str, Path], name: str, elf_class: int, machine: str
) -> None:
    image = read(elf_fixtures[name])
    assert image.elf_class == elf_class
    assert image.machine == machine
    assert image.little_endian is not name.startswith("be")
    if name.startswith("be"):
        imports = {s.name: s for s in image.imports}
        assert imports["aoti_torch_grad_mode_is_enabled"].binding == "WEAK"
        if name.endswith(".so"):
            assert imports["puts"].version == "GLIBC_2.2"
            assert image.needed == ["libc.so.6"] and image.soname == "libbe_blob.so"
        assert names(image.exports) == {
            "AOTInductorModelContainerRun",
            "AOTInductorModelContainerCreateWithDevice",
        }


def test_name_prefix_fast_path_matches_full_read(
    elf_fixtures: dict[str, Path], config: ShimConfig
) -> None:
    for name in ("shim_unprefixed.so", "blob_unprefixed.so", "blob_prefixed.o", "be64_blob.so"):
        data = elf_fixtures[name].read_bytes()
        full = read_elf(data, name)
        fast = read_elf(data, name, name_prefixes=config.families)
        assert fast.name_prefixes == config.families
        assert fast.imports == [s for s in full.imports if s.name.startswith(config.families)]
        assert fast.exports == [s for s in full.exports if s.name.startswith(config.families)]
        assert fast.symbol_count == full.symbol_count
    empty = read_elf(elf_fixtures["blob_prefixed.so"].read_bytes(), "x", name_prefixes=["zz"])
    assert empty.imports == [] and empty.exports == []


def test_carved_and_zipped_blob_equal_the_file(elf_fixtures: dict[str, Path]) -> None:
    blob = elf_fixtures["blob_unprefixed.so"].read_bytes()
    pte = elf_fixtures["model.pte"].read_bytes()
    assert pte[PTE_BLOB_OFFSET : PTE_BLOB_OFFSET + len(blob)] == blob
    assert PT2_BLOB_MEMBER.endswith(".wrapper.so")


def test_not_elf_raises_format_error() -> None:
    with pytest.raises(ElfFormatError) as info:
        read_elf(b"hello world, definitely not ELF", "x.bin")
    assert info.value.location == "x.bin"
    assert "not an ELF file" in info.value.message
    with pytest.raises(ElfFormatError, match="truncated"):
        read_elf(b"\x7fELF\x02\x01\x01" + b"\0" * 20, "short.so")


def test_equal_names_are_ordered_by_version() -> None:
    from tests.fixtures.elfwriter import ElfSpec, WSym, write_elf

    syms = [
        WSym("dup", defined=False, version="V2", version_file="libb.so"),
        WSym("dup", defined=False, version="V1", version_file="liba.so"),
        WSym("aaa", defined=False),
    ]
    image = read_elf(write_elf(ElfSpec(symbols=syms)), "dups.so")
    assert [(s.name, s.version) for s in image.imports] == [
        ("aaa", None),
        ("dup", "V1"),
        ("dup", "V2"),
    ]


def test_read_from_mmap_leaves_no_views_behind(elf_fixtures: dict[str, Path]) -> None:
    """Callers may pass an mmap and close it right after: no view may outlive read_elf."""
    import mmap

    from shimkit.elf import read_elf_names

    for name in ("blob_unprefixed.so", "be32_blob.so", "blob_prefixed.o"):
        with elf_fixtures[name].open("rb") as handle:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                image = read_elf(data, name)
                names = read_elf_names(data, name)
            assert data.closed  # closing did not raise BufferError
        assert [s.name for s in image.imports] == names.imports
    broken = bytearray(elf_fixtures["blob_unprefixed.so"].read_bytes())
    broken[0x28:0x30] = (len(broken) - 8).to_bytes(8, "little")  # e_shoff near the end
    with pytest.raises(ElfFormatError):
        read_elf(bytes(broken), "broken.so")


def test_errors_release_the_callers_mmap(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    """A malformed image read from an mmap: the error must not keep views of it alive."""
    import mmap
    import struct

    from shimkit.elf.layout import parse_layout

    data = bytearray(elf_fixtures["blob_unprefixed.so"].read_bytes())
    layout = parse_layout(data)
    dynsym = layout.sections[layout.sections_of_type(11)[0]]
    struct.pack_into("<I", data, dynsym.offset + 24, 0xFFFFFF)  # symbol 1 name
    bad = tmp_path / "bad.so"
    bad.write_bytes(bytes(data))
    with (
        bad.open("rb") as handle,
        pytest.raises(ElfFormatError) as info,
        mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
    ):
        read_elf(mapped, "bad.so")
    assert "past the end of its string table" in info.value.message
    assert info.value.__context__ is None
