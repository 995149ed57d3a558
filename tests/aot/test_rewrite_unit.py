"""`shimkit rewrite` on small gcc-built blobs: renames, refusals, bad input, safe outputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from shimkit.aot.elfpatch import patch_blob
from shimkit.aot.rewrite import ENGINES, rewrite_blob_file
from shimkit.checks.blob import PREFIXED_BLOB_RULES, blob_findings, read_blob_image
from shimkit.cli import main
from shimkit.config import ShimConfig
from shimkit.elf import ElfImage
from shimkit.errors import ShimkitError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

BLOB_C = r"""
typedef void* AtenTensorHandle;
extern int aoti_torch_get_numel(AtenTensorHandle, long*);
extern int torch_stable_thing(void);
int AOTInductorModelRun(AtenTensorHandle t, long* n) {
  return aoti_torch_get_numel(t, n) + torch_stable_thing();
}
"""
CXX_BLOB = r"""
#include <string>
extern "C" int aoti_torch_get_numel(void*, long*);
extern "C" int AOTInductorModelRun(void* t, long* n) {
  std::string text = std::to_string(aoti_torch_get_numel(t, n));
  return (int)text.size() + 1;
}
"""
PROVIDER_C = "int aoti_torch_get_numel(void* t, long* n) { (void)t; *n = 1; return 0; }\n"
# Provides the prefixed names a rewritten blob imports: one renamed by the rename
# header, one (not a torch name, so not in the header) spelled out.
PREFIXED_PROVIDER_C = r"""
int aoti_torch_get_numel(void* t, long* n) { (void)t; *n = 40; return 0; }
int PREFIXED_STABLE_THING(void) { return 2; }
"""


def read_blob_info(path: Path) -> ElfImage:
    return read_blob_image(path.read_bytes(), str(path))


def prefixed_problems(image: ElfImage, config: ShimConfig) -> list[str]:
    """What keeps `image` from being a prefixed blob, by the linter's rules."""
    return [f.rule_id for f in blob_findings(image, config, rules=PREFIXED_BLOB_RULES)]


def names(symbols: list) -> list[str]:  # type: ignore[type-arg]
    return [s.name for s in symbols]


def gcc(*argv: str) -> None:
    subprocess.run(["gcc", *argv], check=True, capture_output=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("blobs")
    (work / "blob.c").write_text(BLOB_C)
    (work / "provider.c").write_text(PROVIDER_C)
    (work / "empty.c").write_text("int shimkit_test_unused;\n")
    stub = work / "libtorch_stub.so"
    gcc("-shared", "-fPIC", str(work / "empty.c"), "-o", str(stub))
    blob = work / "blob.so"
    gcc(
        "-shared", "-fPIC", str(work / "blob.c"), "-o", str(blob), "-Wl,-z,execstack",
        f"-L{work}", "-Wl,--no-as-needed", "-ltorch_stub",
    )  # fmt: skip
    (work / "v.map").write_text("V1 { global: aoti_torch_get_numel; local: *; };\n")
    versioned_provider = work / "libvprov.so"
    gcc(
        "-shared", "-fPIC", str(work / "provider.c"), "-o", str(versioned_provider),
        f"-Wl,--version-script={work / 'v.map'}",
    )  # fmt: skip
    versioned = work / "versioned.so"
    gcc(
        "-shared", "-fPIC", str(work / "blob.c"), "-o", str(versioned),
        f"-L{work}", "-Wl,--no-as-needed", "-lvprov",
    )  # fmt: skip
    provider = work / "provider.so"
    gcc("-shared", "-fPIC", str(work / "provider.c"), "-o", str(provider))
    # C++ runtime imports reached only through libtorch (no NEEDED libstdc++ of its own).
    (work / "cxx.cpp").write_text(CXX_BLOB)
    subprocess.run(
        ["g++", "-c", "-fPIC", str(work / "cxx.cpp"), "-o", str(work / "cxx.o")], check=True
    )
    cxx = work / "cxx.so"
    gcc(
        "-shared", str(work / "cxx.o"), "-o", str(cxx), f"-L{work}", "-Wl,--no-as-needed",
        "-ltorch_stub",
    )  # fmt: skip
    return {"blob": blob, "versioned": versioned, "provider": provider, "cxx": cxx, "dir": work}


def fresh_dir(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    return directory


@pytest.mark.parametrize("engine", ENGINES)
def test_rewrite_renames_imports_drops_libtorch_and_clears_exec_stack(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig, engine: str
) -> None:
    before = read_blob_info(built["blob"])
    assert "libtorch_stub.so" in before.needed and before.exec_stack
    assert prefixed_problems(before, config) == ["SK001", "SK001", "SK005", "SK007"]  # control
    out = tmp_path / "blob.prefixed.so"
    [record] = rewrite_blob_file(built["blob"], out, config, engine=engine)
    assert sorted(record.renamed) == ["aoti_torch_get_numel", "torch_stable_thing"]
    after = read_blob_info(out)
    assert config.prefixed("aoti_torch_get_numel") in names(after.imports)
    assert config.prefixed("torch_stable_thing") in names(after.imports)
    assert not [s for s in after.imports if config.is_family(s.name)]
    assert after.needed == [n for n in before.needed if n != "libtorch_stub.so"]
    assert not after.exec_stack
    assert names(after.exports) == names(before.exports)
    assert prefixed_problems(after, config) == []
    nm = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True, check=True)
    assert f"U {config.prefixed('aoti_torch_get_numel')}" in nm.stdout


def test_rewrite_of_a_pt2_keeps_other_members(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    package = tmp_path / "m.pt2"
    member = "m/data/aotinductor/model/x.wrapper.so"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("m/archive_format", "pt2")
        archive.write(built["blob"], member)
    out = tmp_path / "m.prefixed.pt2"
    [record] = rewrite_blob_file(package, out, config)
    assert record.member == member
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["m/archive_format", member]
        assert archive.read("m/archive_format") == b"pt2"
        rewritten = archive.read(member)
    assert config.prefixed("aoti_torch_get_numel").encode() in rewritten


def test_refuses_a_blob_that_defines_shims(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    out_dir = fresh_dir(tmp_path, "out")
    with pytest.raises(ShimkitError, match="defines shim symbol"):
        rewrite_blob_file(built["provider"], out_dir / "p.so", config)
    assert list(out_dir.iterdir()) == []


def test_refuses_versioned_shim_imports(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    info = read_blob_info(built["versioned"])
    assert any(s.name == "aoti_torch_get_numel" and s.version == "V1" for s in info.imports)
    out_dir = fresh_dir(tmp_path, "out")
    with pytest.raises(ShimkitError, match=r"versioned shim symbol.*aoti_torch_get_numel@V1"):
        rewrite_blob_file(built["versioned"], out_dir / "v.so", config)
    assert list(out_dir.iterdir()) == []


def test_non_elf_and_truncated_blobs_are_clear_errors(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    text = tmp_path / "notes.so"
    text.write_text("not a shared object\n")
    with pytest.raises(ShimkitError, match=r"neither an ELF shared object nor a \.pt2"):
        rewrite_blob_file(text, tmp_path / "a.so", config)
    data = built["blob"].read_bytes()
    for size in (64, 700, len(data) // 2):
        truncated = tmp_path / f"trunc{size}.so"
        truncated.write_bytes(data[:size])
        with pytest.raises(ShimkitError, match=r"truncated or malformed|no \.dynsym"):
            rewrite_blob_file(truncated, tmp_path / f"out{size}.so", config)
    assert not list(tmp_path.glob("out*.so"))


def test_zip_without_blob_is_a_clear_error(tmp_path: Path, config: ShimConfig) -> None:
    package = tmp_path / "empty.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("empty/archive_format", "pt2")
    with pytest.raises(ShimkitError, match="no data/aotinductor"):
        rewrite_blob_file(package, tmp_path / "o.pt2", config)
    assert not (tmp_path / "o.pt2").exists()


def test_existing_output_is_refused_then_forced(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    out = tmp_path / "taken.so"
    out.write_text("keep me")
    with pytest.raises(ShimkitError, match="output exists"):
        rewrite_blob_file(built["blob"], out, config)
    assert out.read_text() == "keep me"
    rewrite_blob_file(built["blob"], out, config, overwrite=True)
    assert names(read_blob_info(out).exports) == ["AOTInductorModelRun"]


def test_cli_in_place_and_one_line_errors(
    built: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], config: ShimConfig
) -> None:
    blob = tmp_path / "inplace.so"
    shutil.copy(built["blob"], blob)
    assert main(["rewrite", str(blob), "--in-place"]) == 0
    assert prefixed_problems(read_blob_info(blob), config) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inplace.so"]  # no temp left over
    capsys.readouterr()
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"\x7fELF" + b"\0" * 10)
    assert main(["rewrite", str(bogus)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shimkit: error: ") and str(bogus) in err
    assert "Traceback" not in err


def load_and_call(
    blob: Path, provider: Path, library_path: Path
) -> subprocess.CompletedProcess[str]:
    """dlopen `blob` after `provider` (RTLD_GLOBAL) in a fresh process and call its entry."""
    code = (
        "import ctypes, os\n"
        f"ctypes.CDLL({str(provider)!r}, mode=os.RTLD_GLOBAL | os.RTLD_NOW)\n"
        f"lib = ctypes.CDLL({str(blob)!r}, mode=os.RTLD_NOW)\n"
        "n = ctypes.c_long(0)\n"
        "print(lib.AOTInductorModelRun(None, ctypes.byref(n)), n.value)\n"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(library_path)}  # finds libtorch_stub.so
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("engine", ENGINES)
def test_rewritten_blob_loads_and_calls_the_prefixed_provider(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig, rename_header: Path, engine: str
) -> None:
    source = tmp_path / "prefixed_provider.c"
    source.write_text(PREFIXED_PROVIDER_C)
    provider = tmp_path / "libprefixed_provider.so"
    gcc(
        "-shared", "-fPIC", "-include", str(rename_header), *config.flags,
        f"-DPREFIXED_STABLE_THING={config.prefixed('torch_stable_thing')}",
        str(source), "-o", str(provider),
    )  # fmt: skip
    out = tmp_path / f"blob.{engine}.so"
    rewrite_blob_file(built["blob"], out, config, engine=engine)
    proc = load_and_call(out, provider, built["dir"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "40"]
    # Negative control: the original blob does not bind to the prefixed provider.
    proc = load_and_call(built["blob"], provider, built["dir"])
    assert proc.returncode != 0 and "undefined symbol: " in proc.stderr
    assert config.prefix not in proc.stderr.rsplit("undefined symbol: ", 1)[1]


def test_patch_engine_moves_no_original_byte(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    from elftools.elf.elffile import ELFFile

    out = tmp_path / "patched.so"
    rewrite_blob_file(built["blob"], out, config, engine="patch")
    before, after = built["blob"].read_bytes(), out.read_bytes()
    assert after.startswith(before[:64][:16])
    with built["blob"].open("rb") as handle:
        for section in ELFFile(handle).iter_sections():
            if section.name in (".text", ".rodata", ".data", ".gnu.hash", ".rela.dyn", ".got"):
                start, size = section["sh_offset"], section["sh_size"]
                assert after[start : start + size] == before[start : start + size], section.name


def test_patch_engine_without_a_spare_program_header(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig
) -> None:
    blob = tmp_path / "nonote.so"
    gcc("-shared", "-fPIC", str(built["dir"] / "blob.c"), "-o", str(blob), "-Wl,--build-id=none")
    with pytest.raises(ShimkitError, match=r"no spare PT_NOTE.*--engine lief"):
        rewrite_blob_file(blob, tmp_path / "o.so", config, engine="patch")
    assert not (tmp_path / "o.so").exists()
    rewrite_blob_file(blob, tmp_path / "o.so", config, engine="lief")
    assert prefixed_problems(read_blob_info(tmp_path / "o.so"), config) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_libstdcxx_is_named_when_libtorch_is_dropped(
    built: dict[str, Path], tmp_path: Path, config: ShimConfig, rename_header: Path, engine: str
) -> None:
    before = read_blob_info(built["cxx"])
    assert not any(n.startswith("libstdc++") for n in before.needed)  # the premise
    out = tmp_path / f"cxx.{engine}.so"
    [record] = rewrite_blob_file(built["cxx"], out, config, engine=engine)
    assert record.added_needed == ["libstdc++.so.6"]
    after = read_blob_info(out)
    assert "libstdc++.so.6" in after.needed
    assert not [n for n in after.needed if n.startswith("libtorch")]
    source = tmp_path / "prefixed_provider.c"
    source.write_text(PREFIXED_PROVIDER_C)
    provider = tmp_path / "libprefixed_provider.so"
    gcc(
        "-shared", "-fPIC", "-include", str(rename_header), *config.flags,
        "-DPREFIXED_STABLE_THING=unused_stable_thing", str(source), "-o", str(provider),
    )  # fmt: skip
    proc = load_and_call(out, provider, built["dir"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "40"]  # len(to_string(0)) + 1, and n
    # Negative control: the same rewrite without naming libstdc++ cannot load.
    bare = patch_blob(
        built["cxx"].read_bytes(),
        lambda name: config.prefixed(name) if config.is_family(name) else None,
        lambda library: library.startswith("libtorch"),
    )
    unnamed = tmp_path / f"cxx.{engine}.bare.so"
    unnamed.write_bytes(bare.data)
    proc = load_and_call(unnamed, provider, built["dir"])
    assert proc.returncode != 0
    assert "undefined symbol: _Z" in proc.stderr or "undefined symbol: __gxx" in proc.stderr


def test_refuses_blobs_that_import_libtorch_cxx_symbols(tmp_path: Path, config: ShimConfig) -> None:
    source = tmp_path / "c10user.cpp"
    source.write_text(
        "namespace c10 { void report_error(int); }\n"
        'extern "C" int aoti_torch_get_numel(void*, long*);\n'
        'extern "C" int AOTInductorModelRun(void* t, long* n) {\n'
        "  c10::report_error(1);\n  return aoti_torch_get_numel(t, n);\n}\n"
    )
    blob = tmp_path / "c10user.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(blob)], check=True)
    with pytest.raises(ShimkitError, match=r"imports libtorch C\+\+ symbol.*_ZN3c10"):
        rewrite_blob_file(blob, tmp_path / "o.so", config)
    assert not (tmp_path / "o.so").exists()
