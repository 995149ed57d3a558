"""Bad input is one line naming the file and the fix, never a traceback; names with
control characters or bytes that are not UTF-8 cannot break a terminal line or a JSON
document, and come back exactly from JSON.

Each case has a control: the same command on the intact input succeeds, or the hazard is
shown to be real (a plain parser recurses to death, a raw print carries the escape).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from shimkit.escape import restore

from tests.faults.conftest import Cli, assert_one_line_error, clean_env
from tests.faults.test_runtime_faults import _flag_encrypted

# --- blobs that cannot be loaded: truncated, foreign host ------------------------------


@pytest.mark.parametrize("command", ["probe", "run"])
def test_truncated_blob_is_one_line_naming_the_file(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path], command: str
) -> None:
    blob = tmp_path / "cut.so"
    whole = elf_fixtures["blob_prefixed.so"].read_bytes()
    blob.write_bytes(whole[: len(whole) // 2])
    args = [command, "--zeros", str(blob)] if command == "run" else [command, str(blob)]
    line = assert_one_line_error(cli(args), str(blob), "truncated")
    assert line.count("/") == str(blob).count("/")  # no other path (no internal temp copy)


def test_negative_control_the_whole_blob_is_read(cli: Cli, elf_fixtures: dict[str, Path]) -> None:
    """The intact fixture gets past reading: it fails later, for its missing shims, not as
    an unreadable file (it is a gcc-built stand-in, not a runnable AOTInductor blob)."""
    proc = cli(["probe", str(elf_fixtures["blob_prefixed.so"])])
    assert "truncated" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["probe", "run"])
def test_foreign_host_blob_says_so(cli: Cli, elf_fixtures: dict[str, Path], command: str) -> None:
    blob = elf_fixtures["be64_blob.so"]
    args = [command, "--zeros", str(blob)] if command == "run" else [command, str(blob)]
    line = assert_one_line_error(cli(args), str(blob), "EM_S390", "big-endian", "matching machine")
    assert "No such file" not in line


def test_negative_control_the_foreign_blob_is_readable(
    cli: Cli, elf_fixtures: dict[str, Path]
) -> None:
    proc = cli(["symbols", str(elf_fixtures["be64_blob.so"])])
    assert proc.returncode == 0 and "EM_S390" in proc.stdout


def _patched_section_size(source: Path, target: Path, sh_type: int) -> tuple[int, int, int]:
    """Copy `source` with the first section of `sh_type` given a size that makes its
    offset + size wrap past 2**64; returns (section index, offset, new size)."""
    data = bytearray(source.read_bytes())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for index in range(shnum):
        base = shoff + index * shentsize
        if struct.unpack_from("<I", data, base + 4)[0] == sh_type:
            offset = struct.unpack_from("<Q", data, base + 24)[0]
            size = (1 << 64) - offset + 0x10
            struct.pack_into("<Q", data, base + 32, size)
            target.write_bytes(bytes(data))
            return index, offset, size
    raise AssertionError(f"no section of type {sh_type} in {source}")


@pytest.mark.parametrize("command", ["symbols", "probe"])
def test_wrapped_section_bounds_name_the_section_truthfully(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path], command: str
) -> None:
    blob = tmp_path / "wrap.so"
    index, offset, size = _patched_section_size(elf_fixtures["blob_prefixed.so"], blob, 11)
    line = assert_one_line_error(cli([command, str(blob)]), str(blob))
    assert f"section [{index}]" in line
    assert f"offset 0x{offset:x}" in line and f"size 0x{size:x}" in line
    assert f"0x{(offset + size) % (1 << 64):x} " not in line  # not the wrapped sum


def test_negative_control_the_unpatched_section_is_read(
    cli: Cli, elf_fixtures: dict[str, Path]
) -> None:
    proc = cli(["symbols", str(elf_fixtures["blob_prefixed.so"])])
    assert proc.returncode == 0 and "import " in proc.stdout


# --- files the tools read back: headers, baselines, suppressions ----------------------


def test_header_check_on_a_file_that_is_not_utf8(cli: Cli, tmp_path: Path) -> None:
    header = tmp_path / "rename.h"
    assert cli(["header", "--output", str(header)]).returncode == 0
    assert cli(["header", "--check", "--output", str(header)]).returncode == 0  # control
    header.write_bytes(header.read_bytes() + b"\xff\xfe oops\n")
    proc = cli(["header", "--check", "--output", str(header)])
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(header) in lines[0] and "not UTF-8" in lines[0]
    assert "shimkit header --output" in lines[0]  # the fix


DEPTH = 100_000


def _deep(kind: str) -> str:
    if kind == "json":
        return "[" * DEPTH + "]" * DEPTH
    if kind == "toml-arrays":
        return "a = " + "[" * DEPTH + "]" * DEPTH + "\n"
    return "a = " + "{x = " * DEPTH + "}" * DEPTH + "\n"


@pytest.mark.parametrize(
    ("flag", "name", "kind"),
    [
        ("--baseline", "baseline.json", "json"),
        ("--suppressions", "suppressions.json", "json"),
        ("--suppressions", "suppressions.toml", "toml-arrays"),
        ("--suppressions", "suppressions.toml", "toml-tables"),
    ],
)
def test_deeply_nested_gate_files_are_one_line(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path], flag: str, name: str, kind: str
) -> None:
    nested = tmp_path / name
    nested.write_text(_deep(kind))
    args = ["gate", "--no-reference", flag, str(nested), str(elf_fixtures["blob_prefixed.so"])]
    if flag == "--suppressions":
        args[2:2] = ["--baseline", str(tmp_path / "none.json")]
    proc = cli(args, cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr + proc.stdout
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if str(nested) in line]
    assert len(said) == 1 and "nested too deeply" in said[0], proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", ["json", "toml-arrays", "toml-tables"])
def test_negative_control_plain_parsers_recurse_to_death(tmp_path: Path, kind: str) -> None:
    """What the gate did before: json/tomllib straight on the file."""
    parser = "json.loads" if kind == "json" else "tomllib.loads"
    source = tmp_path / "deep.txt"
    source.write_text(_deep(kind))
    code = f"import json, sys, tomllib\n{parser}(open(sys.argv[1]).read())\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(source)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0 and "RecursionError" in proc.stderr


@pytest.fixture
def baseline(cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]) -> Iterator[Path]:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("blob_prefixed.so", "shim_prefixed.so"):
        shutil.copyfile(elf_fixtures[name], inputs / name)
    path = tmp_path / "baseline.json"
    args = ["gate", "--no-reference", "--baseline", str(path), "--update", str(inputs)]
    assert cli(args, cwd=tmp_path).returncode == 0
    yield path


def _gate(cli: Cli, baseline: Path) -> subprocess.CompletedProcess[str]:
    inputs = baseline.parent / "in"
    return cli(["gate", "--no-reference", "--baseline", str(baseline), str(inputs)],
               cwd=baseline.parent)  # fmt: skip


def test_negative_control_the_written_baseline_passes(cli: Cli, baseline: Path) -> None:
    proc = _gate(cli, baseline)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _doctor(baseline: Path, how: str) -> None:
    document = json.loads(baseline.read_text())
    if how == "nan":
        baseline.write_text(json.dumps(document).replace('"schema"', '"n": NaN, "schema"', 1))
        return
    if how == "prefix":
        document["config"]["prefix"] = "acme_"
    else:
        document["artifacts"].append(document["artifacts"][0])
    baseline.write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("how", "needle"),
    [
        ("nan", "NaN is not a JSON number"),
        ("prefix", "written for prefix 'acme_'"),
        ("repeat", "repeats path"),
    ],
)
def test_suspicious_baselines_are_refused(cli: Cli, baseline: Path, how: str, needle: str) -> None:
    _doctor(baseline, how)
    proc = _gate(cli, baseline)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    said = [line for line in proc.stdout.splitlines() if str(baseline) in line]
    assert len(said) == 1 and needle in said[0], proc.stdout


# --- zip members that cannot be read -------------------------------------------------


def test_encrypted_member_is_named_in_plain_words(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    package = tmp_path / "model.pt2"
    shutil.copyfile(elf_fixtures["model.pt2"], package)
    with zipfile.ZipFile(package) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
    _flag_encrypted(package, member, True)
    proc = cli(["lint", "--no-reference", str(package)])
    said = [line for line in proc.stdout.splitlines() if f"{package}!{member}" in line]
    assert len(said) == 1 and "encrypted member: cannot be read; store it unencrypted" in said[0]
    assert "RuntimeError" not in proc.stdout and "(" not in said[0].split(member, 1)[1]
    _flag_encrypted(package, member, False)  # control: the same member, readable again
    ok = cli(["lint", "--no-reference", str(package)])
    assert "encrypted member" not in ok.stdout and "SK001" in ok.stdout


# --- names with control characters and bytes that are not UTF-8 ------------------------

EVIL_FILE = "evil\x1b[31m\nline\udcff\udc85\u202e.so"  # ESC, newline, 2 bad bytes, RLO
# Every C0 control but NUL (zip names end there), DEL, every C1 control, the Unicode line
# separators and bidirectional controls, and a terminal title sequence.
HOSTILE = "".join(
    chr(c)
    for c in [*range(1, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F)]
)
EVIL_MEMBER = f"data/aotinductor/model/a\x1b]0;pwn\x07{HOSTILE}b.wrapper.so"


def _shown(name: str) -> str:
    """How a name must read in text output (the rule, written out independently of
    shimkit.escape): \\n \\r \\t, \\xNN for other controls and for bytes that are not
    UTF-8, \\uNNNN for the line separators and bidirectional controls."""
    out = []
    for char in name:
        code = ord(char)
        if char in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code in (0x2028, 0x2029) or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append(f"\\u{code:04x}")
        elif char == "\\":
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)


def _forbidden(text: str) -> list[str]:
    """Characters that must not reach a terminal: C0 but newline, DEL, C1, lone
    surrogates, line separators and bidirectional overrides."""
    bad = {chr(c) for c in [*range(0x0A), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
    bad |= {chr(c) for c in [0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
    return sorted({repr(ch) for ch in text if ch in bad or 0xD800 <= ord(ch) <= 0xDFFF})


@pytest.fixture
def evil_tree(tmp_path: Path, elf_fixtures: dict[str, Path]) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    blob = elf_fixtures["blob_unprefixed.so"]
    shutil.copyfile(blob, os.fsencode(tree / EVIL_FILE))
    with zipfile.ZipFile(tree / "pkg.pt2", "w") as package:
        package.writestr(EVIL_MEMBER, blob.read_bytes())
    return tree


@pytest.fixture
def evil_empty(tmp_path: Path) -> Path:
    """An input error whose name is hostile too (named explicitly: walks skip empty files)."""
    empty = tmp_path / "empty\x1b[2J.so"
    empty.write_bytes(b"")
    return empty


TEXT_COMMANDS = {
    "lint": ["lint", "--no-reference", "{tree}", "{empty}"],
    "symbols": ["symbols", "{tree}", "{empty}"],
    "gate": ["gate", "--no-reference", "--baseline", "{tmp}/b.json", "{tree}", "{empty}"],
}


@pytest.mark.parametrize("command", sorted(TEXT_COMMANDS))
def test_text_output_escapes_hostile_names(
    cli: Cli,
    tmp_path: Path,
    evil_tree: Path,
    evil_empty: Path,
    elf_fixtures: dict[str, Path],
    command: str,
) -> None:
    if command == "gate":  # a baseline without the hostile files: they show as drift
        other = tmp_path / "other"
        other.mkdir()
        shutil.copyfile(elf_fixtures["blob_prefixed.so"], other / "ok.so")
        update = ["gate", "--no-reference", "--baseline", str(tmp_path / "b.json"), "--update"]
        assert cli([*update, str(other)], cwd=tmp_path).returncode == 0
    args = [
        a.format(tree=evil_tree, tmp=tmp_path, empty=evil_empty) for a in TEXT_COMMANDS[command]
    ]
    proc = cli(args, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert _forbidden(stream) == [], stream
    lines = (proc.stdout + proc.stderr).splitlines()
    # Each name whole on one line, every byte shown.
    assert any("evil\\x1b[31m\\nline\\xff\\x85\\u202e.so" in line for line in lines)
    assert any(_shown(EVIL_MEMBER) in line for line in lines)
    assert any("empty\\x1b[2J.so" in line and "empty file" in line for line in lines)


def test_negative_control_a_raw_name_breaks_the_line() -> None:
    """What printing the name as it is does: the checks above would catch it."""
    assert _forbidden(f"{EVIL_FILE}: error\n") != []
    assert len(f"{EVIL_FILE}: error".splitlines()) == 2


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


JSON_COMMANDS = {
    "lint-json": ["lint", "--no-reference", "--format", "json", "{tree}"],
    "lint-sarif": ["lint", "--no-reference", "--format", "sarif", "{tree}"],
    "symbols-json": ["symbols", "--format", "json", "{tree}"],
    "gate-baseline": ["gate", "--no-reference", "--baseline", "{tmp}/b.json", "--update", "{tree}"],
}


@pytest.mark.parametrize("command", sorted(JSON_COMMANDS))
def test_json_output_is_valid_unicode_and_lossless(
    cli: Cli, tmp_path: Path, evil_tree: Path, command: str
) -> None:
    args = [a.format(tree=evil_tree, tmp=tmp_path) for a in JSON_COMMANDS[command]]
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "shimkit"), *args],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert b"Traceback" not in proc.stderr
    raw = (tmp_path / "b.json").read_bytes() if command == "gate-baseline" else proc.stdout
    document = json.loads(raw.decode("utf-8"))  # strict UTF-8: no lone surrogates either
    strings = list(_strings(document))
    assert not [s for s in strings if any(0xD800 <= ord(c) <= 0xDFFF for c in s)]
    if command == "lint-sarif":  # names live in URIs (percent-encoded bytes) and messages
        uris = [s for s in strings if s.endswith("evil%1B%5B31m%0Aline%FF%85%E2%80%AE.so")]
        assert uris
        return
    names = {restore(s) for s in strings}
    wanted = {f"tree/{EVIL_FILE}", str(evil_tree / EVIL_FILE)}
    assert names & wanted, sorted(s for s in strings if "evil" in s)
    assert any(n.endswith(EVIL_MEMBER) for n in names)


def test_gate_reads_back_the_hostile_names_it_wrote(
    cli: Cli, tmp_path: Path, evil_tree: Path
) -> None:
    baseline = tmp_path / "b.json"
    args = ["gate", "--no-reference", "--baseline", str(baseline)]
    assert cli([*args, "--update", str(evil_tree)], cwd=tmp_path).returncode in (0, 1)
    proc = cli([*args, str(evil_tree)], cwd=tmp_path)
    assert "match" in proc.stdout.splitlines()[-1], proc.stdout
    # Control: a baseline that lost the escaping (the names written as lone surrogates
    # would be; here simply different) reads as drift.
    text = baseline.read_text().replace("\\\\xff", "\\\\xfe")
    baseline.write_text(text)
    drift = cli([*args, str(evil_tree)], cwd=tmp_path)
    assert drift.returncode != 0
