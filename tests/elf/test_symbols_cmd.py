"""`shimkit symbols`: JSON schema, determinism, text form, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.build import PT2_BLOB_MEMBER, PTE_BLOB_OFFSET
from tests.fixtures.elfwriter import ElfSpec, WSym, write_elf


def test_json_for_files_archives_and_containers(
    run_shimkit, elf_fixtures: dict[str, Path], config
) -> None:
    names = ["blob_unprefixed.so", "libblobs.a", "model.pt2", "model.pte", "shim_prefixed.so"]
    paths = [str(elf_fixtures[n]) for n in names]
    proc = run_shimkit(["symbols", "--format", "json", *paths])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "shimkit.symbols/v1"
    assert doc["errors"] == []
    by_path = {a["path"]: a for a in doc["artifacts"]}
    root = str(elf_fixtures["blob_unprefixed.so"].parent)
    assert list(by_path) == [
        f"{root}/blob_unprefixed.so",
        f"{root}/libblobs.a!blob_unprefixed.o",
        f"{root}/libblobs.a!blob_prefixed.o",
        f"{root}/libblobs.a!a_member_name_longer_than_sixteen.o",
        f"{root}/model.pt2!{PT2_BLOB_MEMBER}",
        f"{root}/model.pte!elf@{PTE_BLOB_OFFSET:#x}",
        f"{root}/shim_prefixed.so",
    ]
    blob = by_path[f"{root}/blob_unprefixed.so"]
    assert set(blob) >= {"path", "imports", "exports", "needed", "soname", "symbol_table"}
    assert "aoti_torch_get_dim" in blob["imports"]
    assert blob["imports"] == sorted(blob["imports"])
    assert blob["symbol_table"] == ".dynsym" and blob["symbol_count"] > 0
    assert by_path[f"{root}/model.pt2!{PT2_BLOB_MEMBER}"]["imports"] == blob["imports"]
    shim = by_path[f"{root}/shim_prefixed.so"]
    assert config.prefixed("aoti_torch_get_dim") in shim["exports"]


def test_versions_are_stripped_and_names_unique(run_shimkit) -> None:
    libc = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
    proc = run_shimkit(["symbols", "--format", "json", str(libc)])
    art = json.loads(proc.stdout)["artifacts"][0]
    assert "@" not in "".join(art["exports"] + art["imports"])
    assert art["exports"] == sorted(set(art["exports"]))
    assert "malloc" in art["exports"] and art["soname"] == "libc.so.6"


def test_output_is_deterministic(run_shimkit, elf_fixtures: dict[str, Path]) -> None:
    root = str(elf_fixtures["blob_unprefixed.so"].parent)
    first = run_shimkit(["symbols", "--format", "json", root])
    second = run_shimkit(["symbols", "--format", "json", root])
    assert first.returncode == 0 and first.stdout == second.stdout


def test_errors_exit_1_and_other_artifacts_still_printed(
    run_shimkit, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00" + b"\0" * 10)
    good = elf_fixtures["blob_prefixed.so"]
    proc = run_shimkit(["symbols", "--format", "json", str(bad), str(good)])
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert [a["path"] for a in doc["artifacts"]] == [str(good)]
    assert doc["errors"][0]["path"] == str(bad)
    assert "truncated" in doc["errors"][0]["message"]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"shimkit: error: {bad}: ")


def test_text_format(run_shimkit, elf_fixtures: dict[str, Path]) -> None:
    path = elf_fixtures["blob_needs_libtorch.so"]
    proc = run_shimkit(["symbols", str(path)])
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{path}: DYN EM_X86_64 64-bit"
    assert "  needed libtorch_cpu.so" in lines
    assert any(line.startswith("  import ") for line in lines)
    assert "  export AOTInductorModelContainerRun" in lines


def test_images_without_symbols_are_flagged(run_shimkit, tmp_path: Path) -> None:
    """An empty table and a missing table both show up for the gate; a table the loader
    could not size either (no section headers, no hash table) is an input error."""
    from shimkit.elf.layout import SHT_DYNSYM, parse_layout

    empty = tmp_path / "empty_table.so"
    empty.write_bytes(write_elf(ElfSpec(symbols=[])))
    spec = ElfSpec(symbols=[WSym("aoti_torch_x", defined=False)], needed=["libc.so.6"])
    data = bytearray(write_elf(spec))
    layout = parse_layout(data)
    dynsym = layout.sections_of_type(SHT_DYNSYM)[0]
    type_field = layout.shoff + dynsym * 64 + 4  # ELF64 big-endian sh_type
    data[type_field : type_field + 4] = (1).to_bytes(4, "big")  # SHT_PROGBITS: no .dynsym
    no_table = tmp_path / "no_dynsym.so"
    no_table.write_bytes(bytes(data))
    unsized = bytearray(write_elf(spec))
    unsized[0x28:0x30] = bytes(8)  # e_shoff = 0: no section headers
    unsized[0x3C:0x40] = bytes(4)  # e_shnum = 0, e_shstrndx = 0
    no_hash = tmp_path / "no_sections_no_hash.so"
    no_hash.write_bytes(bytes(unsized))
    paths = [str(empty), str(no_table), str(no_hash)]
    proc = run_shimkit(["symbols", "--format", "json", *paths])
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    arts = {Path(a["path"]).name: a for a in doc["artifacts"]}
    assert arts["empty_table.so"]["symbol_table"] == ".dynsym"
    assert arts["empty_table.so"]["symbol_count"] == 0
    assert arts["no_dynsym.so"]["symbol_table"] is None
    assert arts["no_dynsym.so"]["needed"] == ["libc.so.6"]
    for art in arts.values():
        assert art["imports"] == [] and art["exports"] == []
    assert [e["path"] for e in doc["errors"]] == [str(no_hash)]
    assert "symbol count unknown" in doc["errors"][0]["message"]


def test_usage_errors(run_shimkit) -> None:
    assert run_shimkit(["symbols"]).returncode == 2
    assert run_shimkit(["symbols", "--format", "xml", "x"]).returncode == 2


def test_non_utf8_symbol_names(tmp_path: Path) -> None:
    """Raw bytes come back byte for byte in text, as \\xNN escapes in JSON (valid Unicode,
    lossless: shimkit.escape.restore gives the name back); no traceback."""
    import os
    import subprocess
    import sys

    data = write_elf(ElfSpec(symbols=[WSym("aoti_torch_x", defined=False)]))
    weird = tmp_path / "weird.so"
    weird.write_bytes(data.replace(b"aoti_torch_x", b"aoti_torch\xffx"))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}
    exe = str(Path(sys.executable).parent / "shimkit")
    text = subprocess.run([exe, "symbols", str(weird)], capture_output=True, env=env, check=False)
    assert text.returncode == 0, text.stderr
    assert b"  import aoti_torch\xffx\n" in text.stdout
    raw = subprocess.run(
        [exe, "symbols", "--format", "json", str(weird)], capture_output=True, env=env, check=False
    )
    assert raw.returncode == 0
    assert json.loads(raw.stdout)["artifacts"][0]["imports"] == ["aoti_torch\\xffx"]


def test_warnings_reach_the_output(run_shimkit, tmp_path: Path, elf_fixtures) -> None:
    from tests.elf.test_formats_edge import _strip_section_headers

    stripped = tmp_path / "sstripped.so"
    stripped.write_bytes(_strip_section_headers(elf_fixtures["blob_unprefixed.so"].read_bytes()))
    proc = run_shimkit(["symbols", "--format", "json", str(stripped)])
    art = json.loads(proc.stdout)["artifacts"][0]
    assert art["warnings"] == ["no section headers: .dynsym read through PT_DYNAMIC"]
    assert "aoti_torch_get_dim" in art["imports"]
    text = run_shimkit(["symbols", str(stripped)]).stdout
    assert "  warning no section headers: .dynsym read through PT_DYNAMIC" in text


def test_elf_reader_does_not_import_numpy(elf_fixtures: dict[str, Path]) -> None:
    """The reader is standard library only (`shimkit symbols` and read_elf alike).
    Negative control: the collision reference (name hashes) does import numpy."""
    import subprocess
    import sys

    blob = str(elf_fixtures["blob_prefixed.so"])
    probe = (
        "import sys, io\n"
        "from shimkit.cli import main\n"
        "sys.stdout = io.StringIO()\n"
        f"assert main(['symbols', '--format', 'json', {blob!r}]) == 0\n"
        "from shimkit.elf import read_elf\n"
        f"read_elf(open({blob!r}, 'rb').read(), 'x')\n"
        "print('numpy' in sys.modules, file=sys.stderr)\n"
        "import shimkit.checks.reference\n"
        "print('numpy' in sys.modules, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.split() == ["False", "True"]
