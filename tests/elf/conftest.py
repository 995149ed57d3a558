"""Fixtures for the ELF reader and input tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.build import build_all


@pytest.fixture(scope="session")
def elf_fixtures() -> dict[str, Path]:
    """Every gcc-built fixture by name (see tests/fixtures/README.md)."""
    return build_all()
