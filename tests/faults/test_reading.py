"""Inputs that change while they are read: one error line for that file, never SIGBUS.

Inputs used to be mmap'd from 1 MiB up; a file truncated during the read killed the
process (rc 135) and every other input was lost. Now nothing is mapped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from shimkit.inputs.filedata import SPARSE_FROM, FileChanged, read_file_data

from tests.faults.conftest import Cli

ROUNDS = 30  # races per command below (each a fresh copy truncated while being read)


def big_library(tmp_path: Path) -> Path:
    """A real shared library of at least SPARSE_FROM bytes (libtorch's smaller ones)."""
    import torch

    lib = Path(torch.__file__).parent / "lib"
    for candidate in sorted(lib.glob("lib*.so*"), key=lambda p: p.stat().st_size):
        if candidate.stat().st_size >= 4 * SPARSE_FROM:
            copy = tmp_path / "big.so"
            shutil.copyfile(candidate, copy)
            return copy
    pytest.fail(f"no library of {4 * SPARSE_FROM} bytes or more in {lib}")


def test_truncated_between_stat_and_read_is_an_error_not_a_crash(tmp_path: Path) -> None:
    big = big_library(tmp_path)
    with open(big, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(8)
        os.truncate(big, 4096)
        with pytest.raises(FileChanged, match=r"truncated|changed"):
            read_file_data(handle, size, head)


def test_negative_control_a_mapped_file_truncated_under_the_reader_is_fatal(
    tmp_path: Path,
) -> None:
    """What the old reader did: map, then someone truncates, then a page is touched."""
    big = big_library(tmp_path)
    code = (
        "import mmap, os, sys\n"
        f"f = open({str(big)!r}, 'rb')\n"
        "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
        f"os.truncate({str(big)!r}, 4096)\n"
        "print(m[len(m) - 1])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert proc.returncode == -7  # SIGBUS: no exception, no message, nothing else read


def _race(cli: Cli, tmp_path: Path, command: str, other: Path) -> list[int]:
    """Run `shimkit COMMAND big.so OTHER` ROUNDS times while a thread truncates big.so."""
    source = big_library(tmp_path)
    outcomes = []
    for round_no in range(ROUNDS):
        big = tmp_path / f"race-{round_no}.so"
        shutil.copyfile(source, big)
        stop = threading.Event()

        def truncate(target: Path = big, done: threading.Event = stop) -> None:
            # Shrink it a little at a time, from the end towards the headers, while it is read.
            size = target.stat().st_size
            while not done.is_set() and size > 4096:
                size = max(4096, size - size // 8)
                os.truncate(target, size)

        writer = threading.Thread(target=truncate)
        writer.start()
        try:
            args = [command, "--no-reference"] if command == "lint" else [command]
            proc = cli([*args, str(big), str(other)], timeout=120)
        finally:
            stop.set()
            writer.join()
        assert proc.returncode >= 0, f"round {round_no}: killed by signal {-proc.returncode}"
        assert "Traceback" not in proc.stderr, proc.stderr
        assert str(other) in proc.stdout, f"round {round_no}: the other input was lost"
        outcomes.append(proc.returncode)
        big.unlink()
    return outcomes


@pytest.mark.slow
def test_symbols_survives_truncation_races(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    outcomes = _race(cli, tmp_path, "symbols", elf_fixtures["shim_prefixed.so"])
    assert set(outcomes) <= {0, 1}


@pytest.mark.slow
def test_lint_survives_truncation_races(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    outcomes = _race(cli, tmp_path, "lint", elf_fixtures["blob_unprefixed.so"])
    assert all(code & 8 for code in outcomes)  # the other file's SK001 is always reported
