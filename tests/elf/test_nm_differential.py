"""Differential test: dynamic imports/exports equal binutils `nm -D` on real libraries.

Every shared object in torch's lib/ and a deterministic sample (every k-th by
sorted path) of the system library directory, so the test stays well under a
minute. Set SHIMKIT_NM_ALL=1 to check every system library.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from shimkit.elf import ELF_MAGIC, read_elf, read_elf_names

from tests.elf.common import SYSTEM

SAMPLE = 150
BATCH = 40

pytestmark = pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm missing")


def _torch_lib() -> Path:
    import torch as t

    return Path(t.__file__).parent / "lib"


def _shared_objects(root: Path, recursive: bool) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.so*") if recursive else root.glob("*.so*")):
        if path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as handle:
            if handle.read(4) == ELF_MAGIC:
                found.append(path)
    return found


def _nm(paths: list[Path], *flags: str) -> dict[Path, Counter[str]]:
    """name multiset per file, version suffixes stripped."""
    result: dict[Path, Counter[str]] = {p: Counter() for p in paths}
    by_text = {str(p) + ":": p for p in paths}
    for start in range(0, len(paths), BATCH):
        chunk = paths[start : start + BATCH]
        proc = subprocess.run(
            ["nm", "-D", "-P", *flags, *map(str, chunk)],
            capture_output=True,
            text=True,
            errors="surrogateescape",
            check=False,
        )
        current = chunk[0]
        for line in proc.stdout.splitlines():
            if line in by_text:
                current = by_text[line]
                continue
            if not line.strip():
                continue
            name = line.split(" ", 1)[0].split("@", 1)[0]
            if name:
                result[current][name] += 1
    return result


def _compare(paths: list[Path]) -> list[str]:
    """nm's name multisets against read_elf (one Symbol per table entry), and the
    names-only view (`shimkit symbols`: each name once) against read_elf."""
    undefined = _nm(paths, "--undefined-only")
    defined = _nm(paths, "--defined-only", "--extern-only")
    problems = []
    for path in paths:
        data = path.read_bytes()
        image = read_elf(data, str(path))
        imports = Counter(s.name for s in image.imports)
        exports = Counter(s.name for s in image.exports)
        for what, ours, theirs in (("imports", imports, undefined), ("exports", exports, defined)):
            if ours != theirs[path]:
                diff = Counter(ours)
                diff.subtract(theirs[path])
                changed = {k: v for k, v in diff.items() if v}
                problems.append(f"{path}: {what} differ {changed}")
        names = read_elf_names(data, str(path))
        if (names.imports, names.exports) != (sorted(imports), sorted(exports)):
            problems.append(f"{path}: the names-only view differs from read_elf")
    return problems


def test_torch_lib_equals_nm() -> None:
    paths = [
        p for p in _shared_objects(_torch_lib(), recursive=True) if p.stat().st_size < 64 << 20
    ]
    assert len(paths) >= 5
    assert _compare(paths) == []


def test_libtorch_cpu_equals_nm() -> None:
    path = _torch_lib() / "libtorch_cpu.so"
    if not path.exists():
        pytest.skip("torch wheel without libtorch_cpu.so")
    assert _compare([path]) == []


def test_system_libraries_equal_nm() -> None:
    paths = _shared_objects(SYSTEM, recursive=True)
    assert len(paths) > 50
    if not os.environ.get("SHIMKIT_NM_ALL"):
        step = max(len(paths) // SAMPLE, 1)
        paths = paths[::step]
    assert _compare(paths) == []


@pytest.mark.parametrize("lossy", ["read_elf", "read_elf_names"])
def test_differential_detects_a_missing_symbol(
    monkeypatch: pytest.MonkeyPatch, elf_fixtures: dict[str, Path], lossy: str
) -> None:
    """Negative control: drop one export from one reader's answer; the comparison with nm
    (read_elf) or with read_elf (the names-only view) must notice."""
    module = __import__(__name__, fromlist=["x"])
    real = getattr(module, lossy)

    def drop_first_export(data: bytes, location: str):  # type: ignore[no-untyped-def]
        image = real(data, location)
        image.exports = image.exports[1:]
        return image

    monkeypatch.setattr(module, lossy, drop_first_export)
    problems = _compare([elf_fixtures["blob_prefixed.so"]])
    if lossy == "read_elf":  # nm notices (and so does the names-only view)
        assert any("exports differ" in p for p in problems), problems
    else:
        assert len(problems) == 1 and "names-only view differs" in problems[0], problems
