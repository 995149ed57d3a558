#!/usr/bin/env python3
"""`shimkit symbols` on torch's libtorch_cpu.so vs `nm -D --defined-only`, measured in one run.

Whole processes (what a CI job pays), taking turns in every round so that a load
spike on a shared machine hits all of them alike; medians. shimkit runs with the
reader's compiled names module (shimkit.elf._symnames, built by `pip install`) and,
for comparison, without it (SHIMKIT_ELF_ACCEL=0: the pure-Python reader). Then the
reader in-process. Target (issue 12): the whole `shimkit symbols` process at most
1.2x nm's time. Usage:

    .venv/bin/python bench/bench_symbols.py [--repeat 21] [--pyelftools] [--lib PATH]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCEL_ENV = "SHIMKIT_ELF_ACCEL"  # 0: the reader's pure-Python path
TARGET = 1.2  # shimkit symbols may take at most this multiple of nm's time


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
    """(median, min) seconds per (argv, extra environment), the commands taking turns (exit
    codes are not checked: the start-up floor's `symbols /dev/null` exits 1)."""
    samples: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for (argv, extra), into in zip(commands, samples, strict=True):
            env = {**os.environ, **extra}
            start = time.perf_counter()
            subprocess.run(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False
            )
            into.append(time.perf_counter() - start)
    return [(statistics.median(s), min(s)) for s in samples]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--pyelftools", action="store_true", help="also time pyelftools (~5 s)")
    args = parser.parse_args()
    lib = args.lib or default_lib()
    shimkit = Path(sys.executable).parent / "shimkit"
    lib.read_bytes()  # warm the page cache for everyone
    # Byte-compile shimkit as an installed package is: this checkout's environment sets
    # PYTHONDONTWRITEBYTECODE, and compiling every module at each start is not what a
    # user's process pays. (Existing .pyc files are read even with that variable set.)
    compileall.compile_dir(str(ROOT / "lint" / "shimkit"), quiet=1)

    from shimkit.elf import read_elf, read_elf_names
    from shimkit.elf.symtab import accelerator

    os.environ.pop(ACCEL_ENV, None)
    module = accelerator()
    print(f"# compiled names module: {module.__file__ if module else 'NOT BUILT (pip install)'}")
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    py = sys.executable
    nm = ["nm", "-D", "--defined-only", str(lib)]
    text = [str(shimkit), "symbols", str(lib)]
    json = [str(shimkit), "symbols", "--format", "json", str(lib)]
    processes: list[tuple[str, list[str], dict[str, str]]] = [
        ("nm -D --defined-only", nm, {}),
        ("shimkit symbols (text)", text, {}),
        ("shimkit symbols --format json", json, {}),
        ("shimkit symbols (text), pure Python", text, {ACCEL_ENV: "0"}),
        ("floor: python -c pass", [py, "-c", "pass"], {}),
        (
            "floor: shimkit symbols /dev/null (start-up, exits 1)",
            [str(shimkit), "symbols", os.devnull],
            {},
        ),
    ]
    measured = interleaved([(argv, env) for _, argv, env in processes], args.repeat)
    load_after = os.getloadavg()
    data = lib.read_bytes()
    rows: list[tuple[str, float, float | None]] = [
        (label, med, low) for (label, _, _), (med, low) in zip(processes, measured, strict=True)
    ]

    def python_names() -> object:
        os.environ[ACCEL_ENV] = "0"
        try:
            return read_elf_names(data, "x")
        finally:
            del os.environ[ACCEL_ENV]

    names = read_elf_names(data, str(lib))
    rows += [
        ("in-process: read_elf_names", timed(lambda: read_elf_names(data, "x"), args.repeat), None),
        ("in-process: read_elf_names, pure Python", timed(python_names, args.repeat), None),
        ("in-process: read_elf (Symbols + versions)", timed(lambda: read_elf(data, "x"), 5), None),
        (
            "in-process: read_elf(name_prefixes=shim families)",
            timed(lambda: read_elf(data, "x", name_prefixes=("aoti_torch_", "torch_")), 5),
            None,
        ),
    ]
    if args.pyelftools:
        from elftools.elf.elffile import ELFFile

        def pyelftools_names() -> int:
            with lib.open("rb") as f:
                return sum(1 for s in ELFFile(f).get_section_by_name(".dynsym").iter_symbols())

        rows.append(("in-process: pyelftools .dynsym iteration", timed(pyelftools_names, 1), None))
    print(
        f"# {lib} ({lib.stat().st_size / 1e6:.0f} MB, {len(names.exports)} exported names, "
        f"{len(names.imports)} imported), median of {args.repeat}, processes taking turns"
    )
    for label, seconds, low in rows:
        extra = f"   (min {low * 1000:.1f})" if low is not None else ""
        print(f"{label:52s} {seconds * 1000:9.1f} ms{extra}")
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    table = {label: med for label, med, _ in rows}
    nm_time = table["nm -D --defined-only"]
    for label in (
        "shimkit symbols (text)",
        "shimkit symbols --format json",
        "shimkit symbols (text), pure Python",
    ):
        ratio = table[label] / nm_time
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"{label} / nm: {ratio:.2f}x  [target <= {TARGET}x: {verdict}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
