#!/usr/bin/env python3
"""Files per second over a directory of 1,000 ELF files (copies of the test fixtures).

Measures iter_images / iter_names in-process, `shimkit symbols` as a process,
and `nm -D` over the same files (batched, as xargs would), in one run.

    .venv/bin/python bench/bench_files.py [--files 1000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.build import FIXTURES, build_all  # noqa: E402

PLAIN = [n for n in FIXTURES if n.endswith(".so") and "/" not in n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args()
    fixtures = build_all()
    from shimkit.inputs import iter_images, iter_names

    with tempfile.TemporaryDirectory(prefix="shimkit-bench-") as tmp:
        root = Path(tmp)
        for i in range(args.files):
            name = PLAIN[i % len(PLAIN)]
            sub = root / f"d{i // 100:02d}"
            sub.mkdir(exist_ok=True)
            shutil.copy(fixtures[name], sub / f"{i:04d}_{name}")
        files = sorted(str(p) for p in root.rglob("*.so"))
        for p in files:  # warm the page cache
            Path(p).read_bytes()

        def clock(fn) -> float:  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        results = {
            "iter_images (in-process)": clock(lambda: sum(1 for _ in iter_images([root]))),
            "iter_names (in-process)": clock(lambda: sum(1 for _ in iter_names([root]))),
            "shimkit symbols --format json DIR (process)": clock(
                lambda: subprocess.run(
                    [
                        str(Path(sys.executable).parent / "shimkit"),
                        "symbols",
                        "--format",
                        "json",
                        str(root),
                    ],
                    stdout=subprocess.DEVNULL,
                    check=True,
                )
            ),
            "nm -D over the same files, 200 per call (process)": clock(
                lambda: [
                    subprocess.run(
                        ["nm", "-D", *files[i : i + 200]],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        check=False,
                    )
                    for i in range(0, len(files), 200)
                ]
            ),
        }
    print(f"# {args.files} ELF files (copies of {len(PLAIN)} fixtures, 1-16 KB each)")
    for label, seconds in results.items():
        print(f"{label:52s} {seconds:7.2f} s  {args.files / seconds:8.0f} files/s")
    nm = results["nm -D over the same files, 200 per call (process)"]
    ours = results["shimkit symbols --format json DIR (process)"]
    print(f"ratio nm / shimkit symbols: {nm / ours:.2f}  (>1: shimkit is faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
