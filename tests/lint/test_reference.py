"""Reference export sets: torch discovery, the on-disk cache and its keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from shimkit.checks import reference
from shimkit.errors import ShimkitError


def _entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / reference.CACHE_VERSION).glob("*.npy"))


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SHIMKIT_CACHE_DIR", str(cache))
    return cache


def test_lookup_and_owners(elf_dir: Path, fresh_cache: Path) -> None:
    ref = reference.load_reference([elf_dir / "libreference.so", elf_dir / "libcollides.so"])
    assert ref is not None
    assert ref.intersection(["shared_entry", "ref_only", "nope"]) == {"shared_entry", "ref_only"}
    assert ref.owners("shared_entry") == ["libcollides.so", "libreference.so"]
    assert ref.owners("ref_only") == ["libreference.so"]
    assert ref.intersection([]) == set()


def test_warm_cache_does_not_read_elf(
    elf_dir: Path, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = elf_dir / "libreference.so"
    cold = reference.load_export_hashes(lib)
    assert len(_entries(fresh_cache)) == 1

    def boom(path: Path) -> list[str]:
        raise AssertionError("cache miss")

    monkeypatch.setattr(reference, "_read_exports", boom)
    warm = reference.load_export_hashes(lib)
    assert np.array_equal(cold, warm)
    with pytest.raises(AssertionError):  # control: --no-cache reads the file
        reference.load_export_hashes(lib, use_cache=False)


def test_key_follows_content_and_mtime(elf_dir: Path, fresh_cache: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libref.so"
    lib.write_bytes((elf_dir / "libreference.so").read_bytes())
    first = reference.fingerprint(lib)
    assert reference.fingerprint(lib) == first
    stat = lib.stat()
    os.utime(lib, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert reference.fingerprint(lib) != first
    reference.load_export_hashes(lib)
    lib.write_bytes((elf_dir / "libcollides.so").read_bytes())  # rebuilt library
    after = reference.load_reference([lib])
    assert after is not None and after.intersection(["ref_only"]) == set()


def test_corrupt_entry_is_rebuilt(elf_dir: Path, fresh_cache: Path) -> None:
    lib = elf_dir / "libreference.so"
    good = reference.load_export_hashes(lib)
    [entry] = _entries(fresh_cache)
    entry.write_bytes(b"garbage")
    assert np.array_equal(reference.load_export_hashes(lib), good)
    assert np.load(entry).dtype == np.uint64


def test_unwritable_cache_still_works(
    elf_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SHIMKIT_CACHE_DIR", str(blocker / "cache"))
    ref = reference.load_reference([elf_dir / "libreference.so"])
    assert ref is not None and ref.intersection(["shared_entry"]) == {"shared_entry"}


def test_bad_reference_files(elf_dir: Path, fresh_cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ShimkitError, match="does not exist"):
        reference.load_reference([tmp_path / "absent.so"])
    text = tmp_path / "text.so"
    text.write_text("hello")
    with pytest.raises(ShimkitError, match=r"text\.so"):
        reference.load_reference([text])


def test_directory_reference_expands_to_shared_objects(elf_dir: Path, fresh_cache: Path) -> None:
    assert elf_dir / "libreference.so" in reference.expand([elf_dir])


def test_torch_libraries_found_without_importing_torch() -> None:
    code = (
        "import sys; from shimkit.checks.reference import default_reference_paths as d; "
        "p = d(); print(len(p), 'torch' in sys.modules, sorted(x.name for x in p))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, imported, names = out.stdout.split(" ", 2)
    assert int(count) >= 2 and imported == "False"
    assert "libtorch_cpu.so" in names and "libc10.so" in names and "_test" not in names
