"""What the ELF reader's tests share: the fuzzing settings, the compiled names module
switched off, and the real libraries they read."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from shimkit.elf.symtab import ACCEL_ENV

SYSTEM = Path("/usr/lib/x86_64-linux-gnu")
SYSTEM_SAMPLE = ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1", "libgcc_s.so.1"]

FUZZ = settings(
    max_examples=int(os.environ.get("SHIMKIT_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)


@contextmanager
def python_only() -> Iterator[None]:
    """The reader's pure-Python path: the compiled names module off (the variable is read
    on every call)."""
    old = os.environ.get(ACCEL_ENV)
    os.environ[ACCEL_ENV] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[ACCEL_ENV]
        else:
            os.environ[ACCEL_ENV] = old


def system_library(name: str) -> Path:
    """A library of this machine's system directory (the test skips where it is absent)."""
    path = SYSTEM / name
    if not path.exists():
        pytest.skip(f"{path} not on this machine")
    return path.resolve()


def torch_small_libs() -> list[Path]:
    """torch's shared libraries under 4 MB (all of them: they read in seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return []
    lib = Path(spec.origin).parent / "lib"
    return sorted(p for p in lib.glob("*.so*") if p.stat().st_size < 4 << 20)
