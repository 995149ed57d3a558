"""Switching the ELF reader's compiled names module (shimkit.elf._symnames) off in tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from shimkit.elf.symtab import ACCEL_ENV


@contextmanager
def python_only() -> Iterator[None]:
    """The reader's pure-Python path (the variable is read on every call)."""
    old = os.environ.get(ACCEL_ENV)
    os.environ[ACCEL_ENV] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[ACCEL_ENV]
        else:
            os.environ[ACCEL_ENV] = old
