"""The blob half of `make demo`: from torch's default blob to a prefixed one running
on the slim runtime next to libtorch.

Each step runs the real `shimkit` console script (what a user types) and prints
its output; the demo checks the exit codes, so a regression fails the demo.
Compiled packages are kept under build/demo/ and reused on the next run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "demo"
MODEL = ROOT / "examples" / "models" / "mlp.py"
SHIMKIT = [sys.executable, "-m", "shimkit"]

# Compiles MODEL with torch's defaults: the blob imports unprefixed aoti_torch_*.
_DEFAULT_COMPILE = textwrap.dedent(
    """
    import runpy, sys, torch
    ns = runpy.run_path(sys.argv[1])
    ep = torch.export.export(ns["model"], ns["example_inputs"])
    torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2])
    """
)


def header(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def shimkit(*args: str, expect: int | None = 0) -> int:
    """Run `shimkit ARGS`, echo the command, and check the exit code if `expect` is set."""
    print(f"$ shimkit {' '.join(args)}", flush=True)
    code = subprocess.run([*SHIMKIT, *args], cwd=ROOT).returncode
    if expect is not None and code != expect:
        raise RuntimeError(f"shimkit {args[0]} exited {code}, expected {expect}")
    return code


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def step_default_blob() -> Path:
    header("5. torch's default blob: the linter rejects it")
    default = OUT / "mlp_default.pt2"
    if not default.exists():
        print(f"compiling {rel(MODEL)} with torch's defaults (15-50 s) ...", flush=True)
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-c", _DEFAULT_COMPILE, str(MODEL), str(default)],
            cwd=ROOT,
            check=True,
        )
    code = shimkit("lint", rel(default), expect=None)
    if code == 0:
        raise RuntimeError("the linter passed torch's default blob")
    print(f"-> exit {code}: unprefixed shim imports (bit 8) and more; the fix hints say what to do")
    return default


def step_rewrite(default: Path) -> None:
    header("6. Fix a prebuilt blob: `shimkit rewrite`, then lint again")
    rewritten = OUT / "mlp_rewritten.pt2"
    rewritten.unlink(missing_ok=True)
    shimkit("rewrite", rel(default), "-o", rel(rewritten))
    shimkit("lint", rel(rewritten))


def step_compile() -> Path:
    header("7. Or compile it prefixed from the start: `shimkit compile`")
    prefixed = OUT / "mlp.pt2"
    if not prefixed.exists():
        shimkit("compile", rel(MODEL), "-o", rel(prefixed))
    shimkit("lint", rel(prefixed))
    return prefixed


def step_probe(prefixed: Path, default: Path) -> None:
    header("8. Same process as libtorch: where does each shim import bind?")
    shimkit("probe", rel(prefixed))
    print("\nNegative control: the default blob, next to libtorch")
    code = shimkit("probe", rel(default), expect=None)
    if code == 0:
        raise RuntimeError("probe accepted the unprefixed blob")
    print(f"-> exit {code}: rejected before loading; opened raw it binds to libtorch")


def step_run_and_time(prefixed: Path, default: Path) -> None:
    header("9. Run on the slim runtime next to libtorch; compare with eager and torch's runner")
    import runpy
    import time

    import numpy as np
    import shimkit.runtime as rt
    import torch

    ns = runpy.run_path(str(MODEL))
    (x,) = ns["example_inputs"]
    expected = ns["model"](x).detach().numpy()
    slim = rt.load(prefixed)
    got = slim(x.numpy())[0]
    error = float(np.max(np.abs(got - expected)))
    print(f"slim runtime vs eager: max |diff| = {error:.2e}")
    if error > 1e-5:
        raise RuntimeError("slim runtime output differs from eager")
    runner = torch._inductor.aoti_load_package(str(default))
    xn = x.numpy()

    def per_call_us(fn: object, calls: int = 3000) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                fn()  # type: ignore[operator]
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
        return best

    with torch.inference_mode():
        torch_us = per_call_us(lambda: runner(x))
    slim_us = per_call_us(lambda: slim(xn))
    print(f"per call (best of 5x3000): slim runtime {slim_us:.1f} us,", end=" ")
    print(f"torch._inductor.aoti_load_package {torch_us:.1f} us")
    print(f"ratio slim/torch = {slim_us / torch_us:.2f} (bench/bench_runtime.py has the full set)")


def run_all() -> bool:
    """Steps 5-9; False (with the reason printed) if any check fails."""
    try:
        default = step_default_blob()
        step_rewrite(default)
        prefixed = step_compile()
        step_probe(prefixed, default)
        step_run_and_time(prefixed, default)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return False
    return True
