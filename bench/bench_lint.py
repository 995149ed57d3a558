#!/usr/bin/env python3
"""Lint benchmarks, with the ratios measured in the same run.

1. The collision check (SK003) against torch's libraries: cold (read the
   ELF files, build the cache) vs warm (cached name hashes), and vs
   `nm -D --defined-only libtorch_cpu.so` as a baseline. Target: warm < 50 ms.
2. In-process lint of a ~1.5 MB AOTI blob from its bytes, as a runtime does before
   dlopen: read_elf + lint_image (target < 2 ms, issue 12), and lint_image alone.

Usage: bench_lint.py [--blob PATH.so] [--repeat N]
Without --blob, a default blob is compiled once with torch (cached under
$SHIMKIT_TEST_CACHE or the temp dir, shared with tests/lint/test_aoti_blob.py).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from shimkit.checks import LintContext, lint_image
from shimkit.checks.reference import default_reference_paths, load_reference, torch_library_dir
from shimkit.config import load_config
from shimkit.elf import read_elf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lint"))


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(min, median) wall time in seconds over `repeat` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def default_blob() -> Path:
    from test_aoti_blob import MODEL  # the same model as the tests (same cache key)

    version = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    key = hashlib.sha256((version + MODEL).encode()).hexdigest()[:16]
    base = Path(os.environ.get("SHIMKIT_TEST_CACHE", Path(tempfile.gettempdir()) / "shimkit-test"))
    pt2 = base / f"default-blob-{key}.pt2"
    if not pt2.is_file():
        base.mkdir(parents=True, exist_ok=True)
        print(f"compiling a default AOTI blob into {pt2} (~20-50 s) ...", flush=True)
        subprocess.run([sys.executable, "-c", MODEL, str(pt2)], check=True, capture_output=True)
    out = base / f"default-blob-{key}.wrapper.so"
    if not out.is_file():
        with zipfile.ZipFile(pt2) as archive:
            member = next(n for n in archive.namelist() if n.endswith(".wrapper.so"))
            out.write_bytes(archive.read(member))
    return out


def bench_collisions(blob_exports: list[str], repeat: int) -> None:
    libs = default_reference_paths()
    if not libs:
        print("collision check: torch is not installed; skipped")
        return
    lib_dir = torch_library_dir()
    assert lib_dir is not None
    cache = Path(tempfile.mkdtemp(prefix="shimkit-bench-cache-"))
    os.environ["SHIMKIT_CACHE_DIR"] = str(cache)
    try:

        def check() -> set[str]:
            reference = load_reference(None)
            assert reference is not None
            return reference.intersection(blob_exports)

        cold = best_of(check, 1)[0]  # first call builds the cache
        warm_min, warm_med = best_of(check, repeat)
        nm = shutil.which("nm")
        libtorch = lib_dir / "libtorch_cpu.so"
        nm_time = None
        if nm and libtorch.is_file():
            nm_time = best_of(
                lambda: subprocess.run(
                    [nm, "-D", "--defined-only", str(libtorch)],
                    stdout=subprocess.DEVNULL,
                    check=True,
                ),
                3,
            )[0]
        print(
            f"collision check vs {len(libs)} torch libraries ({', '.join(p.name for p in libs)}):"
        )
        print(f"  cold (read ELF + build cache): {cold * 1e3:8.1f} ms")
        print(
            f"  warm (cached hashes):          {warm_min * 1e3:8.1f} ms min, "
            f"{warm_med * 1e3:.1f} ms median"
            f"  [target < 50 ms: {'OK' if warm_med < 0.050 else 'MISSED'}]"
        )
        print(f"  ratio cold/warm:               {cold / warm_min:8.0f}x")
        if nm_time is not None:
            print(
                f"  nm -D --defined-only libtorch_cpu.so: {nm_time * 1e3:.1f} ms "
                f"(warm check is {nm_time / warm_min:.0f}x faster)"
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def bench_in_process(blob: Path, repeat: int) -> list[str]:
    config = load_config()
    data = blob.read_bytes()
    image = read_elf(data, str(blob))
    context = LintContext(config=config)
    lint_min, lint_med = best_of(lambda: lint_image(image, context), repeat)
    read_min, read_med = best_of(lambda: lint_image(read_elf(data, str(blob)), context), repeat)
    findings = lint_image(image, context)
    print(
        f"in-process lint of {blob.name} ({len(data) / 1e6:.2f} MB, "
        f"{len(image.imports)} imports, {len(image.exports)} exports, {len(findings)} findings):"
    )
    print(
        f"  read_elf + lint_image from bytes: {read_min * 1e3:6.2f} ms min, "
        f"{read_med * 1e3:.2f} ms median"
        f"  [target < 2 ms: {'met' if read_med < 0.002 else 'MISSED'}]"
        f"  (read share {100 * (read_med - lint_med) / read_med:.0f}%)"
    )
    print(
        f"  lint_image (image already read): {lint_min * 1e3:6.2f} ms min, "
        f"{lint_med * 1e3:.2f} ms median"
    )
    print(f"  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return [s.name for s in image.exports]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blob", type=Path, help="an AOTI blob .so (default: compile one)")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    blob = args.blob or default_blob()
    exports = bench_in_process(blob, args.repeat)
    bench_collisions(exports, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
