"""Fixtures of the real-model suite: libtorch in global scope, built libraries, packages.

The slim runtime runs every model next to libtorch_cpu.so loaded RTLD_GLOBAL (the worst
case for symbol binding, as in tests/runtime) and torch imported in the same process.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.models.packages import Package, compiled_pair
from tests.runtime.conftest import libs, libtorch_global  # noqa: F401 (shared fixtures)


class Packages:
    """Compiles (or finds in the on-disk cache) each suite model once per session."""

    def __init__(self) -> None:
        self._done: dict[str, Package] = {}

    def __call__(self, name: str) -> Package:
        if name not in self._done:
            self._done[name] = compiled_pair(name, unprefixed=False)
        return self._done[name]


@pytest.fixture(scope="session")
def packages(libs: Any) -> Packages:  # noqa: F811 (the imported fixture)
    return Packages()
