#!/usr/bin/env python3
"""`shimkit symbols` on torch's libtorch_cpu.so vs `nm -D --defined-only`, measured in one run.

Whole processes (what a CI job pays) and in-process stages. Prints the median
of --repeat runs of each, and the ratios. Usage:

    .venv/bin/python bench/bench_symbols.py [--repeat 5] [--pyelftools] [--lib PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import mmap
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


def process(argv: list[str]) -> Callable[[], object]:
    def run() -> None:
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pyelftools", action="store_true", help="also time pyelftools (~5 s)")
    args = parser.parse_args()
    lib = args.lib or default_lib()
    shimkit = Path(sys.executable).parent / "shimkit"
    lib.read_bytes()  # warm the page cache for everyone

    from shimkit.elf import read_elf, read_elf_names

    with lib.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    names = read_elf_names(memoryview(mapped), str(lib))
    rows: list[tuple[str, float]] = [
        (
            "nm -D --defined-only (process)",
            timed(process(["nm", "-D", "--defined-only", str(lib)]), args.repeat),
        ),
        (
            "shimkit symbols --format json (process)",
            timed(process([str(shimkit), "symbols", "--format", "json", str(lib)]), args.repeat),
        ),
        (
            "python -m shimkit.commands.symbols_cmd --format json (process)",
            timed(
                process(
                    [
                        sys.executable,
                        "-m",
                        "shimkit.commands.symbols_cmd",
                        "--format",
                        "json",
                        str(lib),
                    ]
                ),
                args.repeat,
            ),
        ),
        (
            "python -c 'import shimkit.cli; build_parser()' (process)",
            timed(
                process([sys.executable, "-c", "import shimkit.cli as c; c.build_parser()"]),
                args.repeat,
            ),
        ),
        (
            "python -c 'import numpy' (process)",
            timed(process([sys.executable, "-c", "import numpy"]), args.repeat),
        ),
        (
            "read_elf_names (in-process)",
            timed(lambda: read_elf_names(memoryview(mapped), "x"), args.repeat),
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
        f"{len(names.imports)} imports), median of {args.repeat}"
    )
    for label, seconds in rows:
        print(f"{label:52s} {seconds * 1000:9.1f} ms")
    nm, whole = rows[0][1], rows[1][1]
    print(f"ratio nm / shimkit symbols (process): {nm / whole:.2f}  (>1: shimkit is faster)")
    direct = rows[2][1]
    print(f"ratio nm / symbols_cmd module (process): {nm / direct:.2f}")
    print(f"ratio nm / read_elf_names (in-process): {nm / rows[5][1]:.2f}")
    if args.pyelftools:
        print(f"ratio pyelftools / read_elf_names: {rows[-1][1] / rows[5][1]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
