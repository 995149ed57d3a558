"""The C helper of the names-only reader (shimkit.elf.fastnames, _fastnames.c).

- It builds (without warnings) and is used on this machine.
- Fast path == pure-Python path on real files: libtorch_cpu.so, system libraries and
  the gcc-built fixtures, as ElfNames and as `shimkit symbols` output (JSON and text);
  a corrupted helper result is caught by that comparison (negative control).
- The fallback is taken, with the same answer, when the helper is off, cannot be
  built (no compiler) or cannot be loaded (a broken cached file).
- The C function itself against a Python model of it, on random tables and on
  random bytes with random offsets and sizes (never a crash: None or the model's
  answer). The ELF fuzz tests (test_fuzz.py) compare both paths on mutated files too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shimkit.commands import symbols_cmd
from shimkit.elf import ElfNames, fastnames, read_elf_names
from shimkit.elf.fastnames import FASTNAMES_ENV, MODULE, SortedNames
from shimkit.escape import restore

from tests.fixtures.elfwriter import ElfSpec, WSym, write_elf

SYSTEM = Path("/usr/lib/x86_64-linux-gnu")
SYSTEM_LIBS = ["libc.so.6", "libstdc++.so.6", "libm.so.6", "libz.so.1", "libcrypto.so.3"]
FIXTURES = [
    "blob_unprefixed.so", "blob_prefixed.so", "shim_prefixed.so", "blob_c10.so",
    "blob_unprefixed.o", "blob_unprefixed_32.so", "shim_prefixed_32.so", "be64_blob.so",
    "be32_blob.so", "be64_blob.o", "prog", "prog_nopie", "fake_torch/libtorch_cpu.so",
]  # fmt: skip
FUZZ = settings(
    max_examples=int(os.environ.get("SHIMKIT_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler"
)


@contextmanager
def python_only() -> Iterator[None]:
    """The pure-Python reader: the helper off (read per call, nothing to reset)."""
    old = os.environ.get(FASTNAMES_ENV)
    os.environ[FASTNAMES_ENV] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[FASTNAMES_ENV]
        else:
            os.environ[FASTNAMES_ENV] = old


def helper() -> ModuleType:
    module = fastnames.helper()
    assert module is not None, f"helper not built: {fastnames.load_error()}"
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
    import io

    artifacts, errors = symbols_cmd.collect([str(p) for p in paths])
    out = io.StringIO()
    if fmt == "json":
        symbols_cmd.write_json(out, artifacts, errors)
    else:
        symbols_cmd._write_text(out, artifacts)
    return out.getvalue()


def differences(path: Path) -> list[str]:
    """How the fast path's answer for `path` differs from the pure-Python one."""
    data = path.read_bytes()
    problems = []
    fast = read_elf_names(data, str(path))
    if fast.packed("exports") is None and fast.exports:
        problems.append(f"{path}: fast path not taken")
    fast_json = _symbols_output([path], "json")
    with python_only():
        slow = read_elf_names(data, str(path))
        slow_json = _symbols_output([path], "json")
    assert slow.packed("exports") is None and slow.packed("imports") is None
    if fast != slow:  # materializes the packed lists
        problems.append(f"{path}: ElfNames differ")
    if fast_json != slow_json:
        problems.append(f"{path}: `shimkit symbols --format json` output differs")
    return problems


def test_helper_is_built_and_used(elf_fixtures: dict[str, Path]) -> None:
    module = helper()
    assert module.__name__ == MODULE and Path(module.__file__).is_file()
    assert fastnames.load_error() is None
    image = read_elf_names(elf_fixtures["blob_unprefixed.so"].read_bytes(), "x")
    assert isinstance(image.packed("imports"), SortedNames)
    assert "aoti_torch_get_dim" in image.imports  # first access: a list from now on
    assert image.packed("imports") is None
    with pytest.raises(ValueError, match="no names field"):
        image.packed("needed")


def test_source_compiles_without_warnings(tmp_path: Path) -> None:
    import sysconfig

    include = sysconfig.get_paths()["include"]
    cmd = ["gcc", *fastnames.FLAGS, "-Werror", "-I", include, fastnames.SOURCE]
    proc = subprocess.run(
        [*cmd, "-o", str(tmp_path / "x.so")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_source_is_package_data() -> None:
    import fnmatch

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["shimkit"]
    relative = Path(fastnames.SOURCE).relative_to(root / "lint" / "shimkit").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns), patterns


def test_fast_path_equals_python_path_on_real_files(elf_fixtures: dict[str, Path]) -> None:
    helper()
    files = real_files(elf_fixtures)
    assert len(files) >= 15
    assert [p for f in files for p in differences(f)] == []


def test_symbols_text_and_json_equal_both_ways(elf_fixtures: dict[str, Path]) -> None:
    helper()
    paths = [elf_fixtures[n] for n in ["libblobs.a", "model.pt2", "model.pte"]]
    paths += [SYSTEM / "libc.so.6"]
    fast = [_symbols_output(paths, fmt) for fmt in ("json", "text")]
    with python_only():
        slow = [_symbols_output(paths, fmt) for fmt in ("json", "text")]
    assert fast == slow


def test_corrupted_helper_result_is_detected(
    monkeypatch: pytest.MonkeyPatch, elf_fixtures: dict[str, Path]
) -> None:
    """Negative control: a helper that swaps two neighbouring exports (a sort bug) or
    drops the last one must make the comparison above fail."""
    real = helper()

    def corrupt(how: str) -> ModuleType:
        def sorted_names(*args: object) -> object:
            found = real.sorted_names(*args)
            if found is None:
                return None
            imports, n_imports, imports_plain, exports, n_exports, exports_plain = found
            names = exports.split(b"\0")
            if how == "swap":
                names[0], names[1] = names[1], names[0]
            else:
                names.pop()
                n_exports -= 1
            return imports, n_imports, imports_plain, b"\0".join(names), n_exports, exports_plain

        return SimpleNamespace(sorted_names=sorted_names, join_unique=real.join_unique)  # type: ignore[return-value]

    path = elf_fixtures["shim_prefixed.so"]
    assert differences(path) == []  # positive control
    for how in ("swap", "drop"):
        monkeypatch.setitem(fastnames._STATE, MODULE, corrupt(how))
        problems = differences(path)
        assert any("ElfNames differ" in p for p in problems), (how, problems)
        assert any("output differs" in p for p in problems), (how, problems)


def test_fallback_when_turned_off(elf_fixtures: dict[str, Path]) -> None:
    path = elf_fixtures["blob_c10.so"]
    fast = _symbols_output([path], "json")
    with python_only():
        assert fastnames.helper() is None
        image = read_elf_names(path.read_bytes(), str(path))
        assert image.packed("imports") is None and image.packed("exports") is None
        assert _symbols_output([path], "json") == fast


@pytest.fixture
def fresh_helper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty helper cache, this process's helper forgotten (and restored after)."""
    saved = dict(fastnames._STATE), list(fastnames._ERROR)
    fastnames.reset()
    cache = tmp_path / "cache"
    monkeypatch.setenv("SHIMKIT_CACHE_DIR", str(cache))
    yield cache
    fastnames.reset()
    fastnames._STATE.update(saved[0])
    fastnames._ERROR[:] = saved[1]


def test_fallback_without_a_compiler(
    monkeypatch: pytest.MonkeyPatch, fresh_helper: Path, elf_fixtures: dict[str, Path]
) -> None:
    path = elf_fixtures["shim_prefixed.so"]
    with python_only():
        want = read_elf_names(path.read_bytes(), str(path))
    monkeypatch.setenv("PATH", str(fresh_helper / "no-bin"))
    assert fastnames.helper() is None
    assert "no C compiler" in (fastnames.load_error() or "")
    image = read_elf_names(path.read_bytes(), str(path))
    assert image.packed("exports") is None and image == want
    failed = Path(fastnames.build_dir()) / "FAILED"
    assert failed.is_file()  # remembered: the next process does not try again...
    fastnames.reset()
    monkeypatch.setenv("PATH", os.environ.get("PATH", "") + ":/usr/bin")
    assert fastnames.helper() is None  # ...even with a compiler now (same source)
    assert "earlier build failed" in (fastnames.load_error() or "")


def test_a_damaged_cached_helper_is_rebuilt_not_loaded(
    fresh_helper: Path, elf_fixtures: dict[str, Path]
) -> None:
    target = Path(fastnames.build_dir()) / (MODULE + fastnames._suffix())
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\x7fELF not really")  # no build record: not ours
    path = elf_fixtures["blob_unprefixed.so"]
    image = read_elf_names(path.read_bytes(), str(path))
    assert fastnames.load_error() is None
    assert image.packed("imports") is not None  # the rebuilt helper answered
    assert target.stat().st_size > 1000
    with python_only():
        assert image == read_elf_names(path.read_bytes(), str(path))


def test_a_truncated_cached_helper_never_kills_the_process(
    fresh_helper: Path, elf_fixtures: dict[str, Path]
) -> None:
    """Loading a truncated shared object dies with SIGBUS; the checksum catches it first.
    Negative control: the same truncated file without its checksum check is fatal."""
    target = Path(fastnames.build())
    good = target.read_bytes()
    target.write_bytes(good[: len(good) // 2])
    path = elf_fixtures["blob_unprefixed.so"]
    probe = (
        "import sys; from shimkit.elf import fastnames, read_elf_names; "
        f"d = open({str(path)!r}, 'rb').read(); n = read_elf_names(d, 'x'); "
        "print(fastnames.load_error(), n.packed('imports') is not None)"
    )
    env = {**os.environ, "SHIMKIT_CACHE_DIR": str(fresh_helper)}
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "True"]
    assert target.read_bytes() == good  # rebuilt whole
    target.write_bytes(good[: len(good) // 2])
    unchecked = f"from shimkit.elf import fastnames; fastnames._load({str(target)!r})"
    proc = subprocess.run([sys.executable, "-c", unchecked], capture_output=True, text=True)
    assert proc.returncode != 0  # SIGBUS or an import error: never a silent success


def test_cli_without_a_compiler_gives_the_same_bytes(
    tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    """Whole process, fresh cache, no compiler on PATH: the pure-Python path, same output
    (and, positive control, the same as with the helper built)."""
    exe = str(Path(sys.executable).parent / "shimkit")
    paths = [str(elf_fixtures["shim_prefixed.so"]), str(SYSTEM / "libm.so.6")]
    base = {k: v for k, v in os.environ.items() if k != FASTNAMES_ENV}
    runs = {}
    for label, extra in {
        "helper": {},
        "no-compiler": {"SHIMKIT_CACHE_DIR": str(tmp_path / "c"), "PATH": str(tmp_path)},
    }.items():
        proc = subprocess.run(
            [exe, "symbols", "--format", "json", *paths],
            capture_output=True,
            env={**base, **extra},
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        runs[label] = proc.stdout
    assert (tmp_path / "c").is_dir()  # it tried, in that cache
    assert runs["helper"] == runs["no-compiler"]


def test_json_escapes_with_the_helper(tmp_path: Path) -> None:
    """Names JSON must escape (quote, backslash, control, DEL) keep the list writer; a
    non-ASCII name sends the whole table to the Python reader; plain ones stay packed."""
    plain = ["b_plain", "a_plain", "c_plain"]
    odd = ['q"uote', "back\\slash", "tab\there", "del\x7f"]
    cases = {
        "plain": plain,
        "odd": plain + odd,
        "utf8": [*plain, "caf\u00e9", 'q"'],
    }
    exe = str(Path(sys.executable).parent / "shimkit")
    for label, names in cases.items():
        syms = [WSym(n, defined=True) for n in names] + [WSym("imp_" + n, False) for n in names]
        spec = ElfSpec(little_endian=True, machine="EM_X86_64", symbols=syms)
        path = tmp_path / f"{label}.so"
        path.write_bytes(write_elf(spec))
        image = read_elf_names(path.read_bytes(), str(path))
        packed = image.packed("exports")
        if label == "utf8":
            assert packed is None
        else:
            assert packed is not None and packed.plain == (label == "plain")
        proc = subprocess.run(
            [exe, "symbols", "--format", "json", str(path)], capture_output=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        art = doc["artifacts"][0]
        # Names come back through shimkit.escape.restore (JSON doubles their backslashes).
        assert [restore(n) for n in art["exports"]] == sorted(names)
        assert [restore(n) for n in art["imports"]] == sorted("imp_" + n for n in names)
        assert proc.stdout.decode() == json.dumps(doc, indent=1, sort_keys=True) + "\n"
        slow = subprocess.run(
            [exe, "symbols", "--format", "json", str(path)],
            capture_output=True,
            env={**os.environ, FASTNAMES_ENV: "0"},
            check=False,
        )
        assert slow.stdout == proc.stdout


# ---- the C function against a Python model of it --------------------------------------


def model(
    buf: bytes, sym_off: int, sym_size: int, str_off: int, str_size: int, is64: bool, little: bool
) -> tuple[bytes, int, bool, bytes, int, bool] | None:
    """What sorted_names returns, as documented in _fastnames.c."""
    size, ent = len(buf), (24 if is64 else 16)
    if (
        sym_off > size
        or sym_size > size - sym_off
        or str_off > size
        or str_size > size - str_off
        or sym_size % ent
        or str_size > 0xFFFFFFFF
    ):
        return None
    table = buf[str_off : str_off + str_size]
    lists: tuple[list[bytes], list[bytes]] = ([], [])
    count = sym_size // ent
    for i in range(1, count):
        e = buf[sym_off + i * ent : sym_off + (i + 1) * ent]
        st_name = int.from_bytes(e[:4], "little" if little else "big")
        if st_name >= max(str_size, 1):
            return None
        info, shndx = (e[4], e[6:8]) if is64 else (e[12], e[14:16])
        defined = shndx != b"\0\0"
        if defined and info >> 4 == 0:
            continue
        name = table[st_name:].split(b"\0", 1)[0]
        if any(b >= 0x80 for b in name):
            return None
        if defined:
            lists[1].append(name)
        elif name:
            lists[0].append(name)
    cap = 2 * (str_size + count)  # packed lists larger than this: declined
    if any(sum(map(len, names)) + max(len(names) - 1, 0) > cap for names in lists):
        return None

    def plain(names: list[bytes]) -> bool:
        return all(0x20 <= b < 0x7F and b not in b'"\\' for n in names for b in n)

    imports, exports = sorted(lists[0]), sorted(lists[1])
    return (
        b"\0".join(imports), len(imports), plain(imports),
        b"\0".join(exports), len(exports), plain(exports),
    )  # fmt: skip


_ALPHABET = [b"_Z", b"N3", b"at", b"_ZN2at6native", b"a", b"b", b"", b'"', b"\\", b"\x01", b"\xc3"]


@st.composite
def tables(draw: st.DrawFn) -> tuple[bytes, int, int, int, int, bool, bool]:
    """A symbol table and a string table (names sharing long prefixes, repeated, shared
    tails, one without NUL at the end), laid out in one buffer with some slack. Mostly
    tables the helper takes (ASCII, offsets inside the table), big enough to be sorted
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
    symtab = bytes(ent) + b"".join(rows)
    slack = draw(st.binary(max_size=8))
    buf = slack + symtab + strtab + slack
    return buf, len(slack), len(symtab), len(slack) + len(symtab), len(strtab), is64, little


@FUZZ
@given(case=tables())
def test_c_helper_equals_its_model_on_random_tables(
    case: tuple[bytes, int, int, int, int, bool, bool],
) -> None:
    buf, *args = case
    want = model(buf, *args)  # type: ignore[arg-type]
    assert helper().sorted_names(buf, *args) == want
    assert helper().sorted_names(memoryview(buf), *args) == want


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
def test_c_helper_never_reads_out_of_bounds(
    buf: bytes, sym_off: int, sym_size: int, str_off: int, str_size: int, is64: bool, little: bool
) -> None:
    """Random bytes, offsets and sizes (also past the buffer and 2**64 - 1): None or the
    model's answer, never a crash."""
    args = (sym_off, sym_size, str_off, str_size, is64, little)
    assert helper().sorted_names(buf, *args) == model(buf, *args)


def test_c_helper_sorts_big_tables_like_python() -> None:
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
    rows = b"".join(
        o.to_bytes(4, "little") + bytes([0x12, 0]) + (1).to_bytes(2, "little") + bytes(16)
        for o in offsets
    )
    buf = bytes(24) + rows + strtab
    args = (0, 24 + len(rows), 24 + len(rows), len(strtab), True, True)
    found = helper().sorted_names(buf, *args)
    assert found == model(buf, *args)
    assert found is not None and found[4] == len(offsets)


def test_c_helper_declines_huge_overlapping_names() -> None:
    """Many symbols naming one long string at different offsets would make the packed
    lists far larger than the table: declined (the Python reader keeps one str per
    offset), not a MemoryError."""
    strtab = b"\0" + b"a" * 4000 + b"\0"
    rows = b"".join(
        (1 + i).to_bytes(4, "little") + bytes([0x12, 0, 1, 0]) + bytes(16) for i in range(3000)
    )
    buf = bytes(24) + rows + strtab
    assert helper().sorted_names(buf, 0, 24 + len(rows), 24 + len(rows), len(strtab), 1, 1) is None


@FUZZ
@given(names=st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\0", b"")), min_size=1))
def test_join_unique_equals_python(names: list[bytes]) -> None:
    names.sort()
    data = b"\0".join(names)
    for sep in (b"", b",", b'",\n    "'):
        assert helper().join_unique(data, sep) == sep.join(dict.fromkeys(names))
    packed = SortedNames(data, len(names), plain=True)
    assert packed.unique_joined(b"\0").split(b"\0") == list(dict.fromkeys(names))


def test_sorted_names_object_without_names() -> None:
    empty = SortedNames(b"", 0, plain=True)
    assert empty.names() == [] and empty.unique_joined(b",") == b""
    one_empty = SortedNames(b"", 1, plain=True)
    assert one_empty.names() == [""]
    image = ElfNames("x", "DYN", "EM_X86_64", 64, empty, one_empty, [], None, 0)
    assert image.imports == [] and image.exports == [""]
