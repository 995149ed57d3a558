#!/usr/bin/env python3
"""`shimkit symbols` on torch's libtorch_cpu.so vs `nm -D --defined-only`, measured in one run.

Whole processes (what a CI job pays) and in-process stages. Prints the median
of --repeat runs of each, and the ratios. shimkit runs with its C helper
(shimkit.elf.fastnames; built before the timed runs if need be) and, for
comparison, without it (SHIMKIT_FASTNAMES=0). Usage:

    .venv/bin/python bench/bench_symbols.py [--repeat 5] [--pyelftools] [--lib PATH]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import mmap
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FASTNAMES_ENV = "SHIMKIT_FASTNAMES"  # 0: shimkit's pure-Python names reader

ROOT = Path(__file__).resolve().parents[1]


def default_lib() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("bench_symbols: torch is not installed in this interpreter")
    return Path(spec.origin).parent / "lib" / "libtorch_cpu.so"


def timed(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def interleaved(
    commands: list[tuple[list[str], dict[str, str]]], repeat: int
) -> list[tuple[float, float]]:
    """(median, min) seconds per (argv, extra environment), the commands taking turns in
    every round so that a load spike on the shared machine hits all of them alike."""
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for (argv, extra), into in zip(commands, samples, strict=True):
            env = {**os.environ, **extra}
            start = time.perf_counter()
            subprocess.run(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True
            )
            into.append(time.perf_counter() - start)
    return [(statistics.median(s), min(s)) for s in samples]


@contextmanager
def python_only() -> Iterator[None]:
    """shimkit's pure-Python names reader (the C helper off)."""
    os.environ[FASTNAMES_ENV] = "0"
    try:
        yield
    finally:
        del os.environ[FASTNAMES_ENV]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--pyelftools", action="store_true", help="also time pyelftools (~5 s)")
    args = parser.parse_args()
    lib = args.lib or default_lib()
    shimkit = Path(sys.executable).parent / "shimkit"
    lib.read_bytes()  # warm the page cache for everyone
    # Byte-compile shimkit as an installed package is: this checkout's environment sets
    # PYTHONDONTWRITEBYTECODE, and compiling every module at each start is not what a
    # user's process pays. (Existing .pyc files are read even with that variable set.)
    compileall.compile_dir(str(ROOT / "lint" / "shimkit"), quiet=1)

    from shimkit.elf import fastnames, read_elf, read_elf_names
    from shimkit.elf.reader import read_elf_names_vectorized

    os.environ.pop(FASTNAMES_ENV, None)
    helper = fastnames.helper()  # built here (once per source) if need be, not in a timed run
    print(f"# C helper: {helper.__file__ if helper else fastnames.load_error()}")
    with lib.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    names = read_elf_names(memoryview(mapped), str(lib))
    py = sys.executable
    symbols = [str(shimkit), "symbols", "--format", "json", str(lib)]
    processes: list[tuple[str, list[str], dict[str, str]]] = [
        ("nm -D --defined-only (process)", ["nm", "-D", "--defined-only", str(lib)], {}),
        ("shimkit symbols --format json (process)", symbols, {}),
        (
            "python -m shimkit.commands.symbols_cmd --format json (process)",
            [py, "-m", "shimkit.commands.symbols_cmd", "--format", "json", str(lib)],
            {},
        ),
        (
            "shimkit symbols, SHIMKIT_FASTNAMES=0: pure Python (process)",
            symbols,
            {FASTNAMES_ENV: "0"},
        ),
        ("floor: python -c pass (process)", [py, "-c", "pass"], {}),
        (
            "floor: python -c 'import shimkit.commands.symbols_cmd' (process)",
            [py, "-c", "import shimkit.commands.symbols_cmd"],
            {},
        ),
        ("python -c 'import numpy' (process)", [py, "-c", "import numpy"], {}),
    ]
    measured = interleaved([(argv, env) for _, argv, env in processes], args.repeat)
    rows: list[tuple[str, float]] = [
        (label, med) for (label, _, _), (med, _) in zip(processes, measured, strict=True)
    ]
    fastest = {label: low for (label, _, _), (_, low) in zip(processes, measured, strict=True)}

    def python_names() -> object:
        with python_only():
            return read_elf_names(memoryview(mapped), "x")

    rows += [
        (
            "read_elf_names, C helper: names stay packed (in-process)",
            timed(lambda: read_elf_names(memoryview(mapped), "x"), args.repeat),
        ),
        (
            "read_elf_names, C helper + lists of str (in-process)",
            timed(lambda: read_elf_names(memoryview(mapped), "x").exports, args.repeat),
        ),
        ("read_elf_names, pure Python (in-process)", timed(python_names, args.repeat)),
        (
            "read_elf_names_vectorized, numpy (in-process)",
            timed(lambda: read_elf_names_vectorized(memoryview(mapped), "x"), args.repeat),
        ),
        (
            "read_elf, Symbol objects + versions (in-process)",
            timed(lambda: read_elf(memoryview(mapped), "x"), args.repeat),
        ),
        (
            "read_elf, name_prefixes=shim families (in-process)",
            timed(
                lambda: read_elf(memoryview(mapped), "x", name_prefixes=("aoti_torch_", "torch_")),
                args.repeat,
            ),
        ),
    ]
    if args.pyelftools:
        from elftools.elf.elffile import ELFFile

        def pyelftools_names() -> int:
            with lib.open("rb") as f:
                return sum(1 for s in ELFFile(f).get_section_by_name(".dynsym").iter_symbols())

        rows.append(("pyelftools .dynsym iteration (in-process)", timed(pyelftools_names, 1)))
    print(
        f"# {lib} ({lib.stat().st_size / 1e6:.0f} MB, {len(names.exports)} exports, "
        f"{len(names.imports)} imports), median of {args.repeat} (processes take turns)"
    )
    for label, seconds in rows:
        low = fastest.get(label)
        extra = f"   (min {low * 1000:.1f})" if low is not None else ""
        print(f"{label:66s} {seconds * 1000:9.1f} ms{extra}")
    table = dict(rows)
    nm, whole = table[processes[0][0]], table[processes[1][0]]
    print(f"ratio nm / shimkit symbols (process): {nm / whole:.2f}  (>1: shimkit is faster)")
    low_ratio = fastest[processes[0][0]] / fastest[processes[1][0]]
    print(f"ratio nm / shimkit symbols (process, fastest runs): {low_ratio:.2f}")
    direct = table[processes[2][0]]
    print(f"ratio nm / symbols_cmd module (process): {nm / direct:.2f}")
    pure = table[processes[3][0]]
    print(f"ratio nm / shimkit symbols, pure Python (process): {nm / pure:.2f}")
    names_only = table["read_elf_names, C helper: names stay packed (in-process)"]
    print(f"ratio nm / read_elf_names (in-process): {nm / names_only:.2f}")
    if args.pyelftools:
        print(f"ratio pyelftools / read_elf_names: {rows[-1][1] / names_only:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
