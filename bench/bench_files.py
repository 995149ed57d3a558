#!/usr/bin/env python3
"""Files per second over a directory tree of 1,000 ELF files (copies of the test fixtures).

`shimkit symbols DIR` as a process against `nm -D` over the same files (batched, 200 per
call, as xargs would), taking turns in every round (medians), plus iter_images /
iter_names in-process. Target (issue 12): shimkit's throughput at least 1.5x nm's.

    .venv/bin/python bench/bench_files.py [--files 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.build import FIXTURES, build_all  # noqa: E402

PLAIN = [n for n in FIXTURES if n.endswith(".so") and "/" not in n]
TARGET = 1.5  # shimkit's files/s over nm's, at least


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
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
        shimkit = str(Path(sys.executable).parent / "shimkit")

        def run(argv: list[str]) -> None:
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

        contenders: dict[str, Callable[[], object]] = {
            "nm -D over the same files, 200 per call (process)": lambda: [
                run(["nm", "-D", *files[i : i + 200]]) for i in range(0, len(files), 200)
            ],
            "shimkit symbols DIR (process)": lambda: run([shimkit, "symbols", str(root)]),
            "shimkit symbols --format json DIR (process)": lambda: run(
                [shimkit, "symbols", "--format", "json", str(root)]
            ),
            "iter_names (in-process)": lambda: sum(1 for _ in iter_names([root])),
            "iter_images (in-process)": lambda: sum(1 for _ in iter_images([root])),
        }
        load_before = os.getloadavg()
        samples: dict[str, list[float]] = {label: [] for label in contenders}
        for _ in range(args.repeat):  # every contender once per round
            for label, fn in contenders.items():
                start = time.perf_counter()
                fn()
                samples[label].append(time.perf_counter() - start)
        load_after = os.getloadavg()
    print(
        f"# {args.files} ELF files (copies of {len(PLAIN)} fixtures, 1-16 KB each), median of "
        f"{args.repeat} rounds; load average {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    medians = {label: statistics.median(s) for label, s in samples.items()}
    for label, seconds in medians.items():
        print(f"{label:52s} {seconds:7.3f} s  {args.files / seconds:8.0f} files/s")
    nm = medians["nm -D over the same files, 200 per call (process)"]
    for label in ("shimkit symbols DIR (process)", "shimkit symbols --format json DIR (process)"):
        ratio = nm / medians[label]
        verdict = "met" if ratio >= TARGET else "MISSED"
        print(f"{label} throughput / nm's: {ratio:.2f}x  [target >= {TARGET}x: {verdict}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
