"""Fixtures for evaluating the real rules/*.bzl with a recording fake back-end."""

from __future__ import annotations

import pytest
from bzl_harness import BACKENDS, FakeBuild


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest) -> FakeBuild:
    """A fresh fake build of the repository, once per back-end (Bazel, Buck2)."""
    return FakeBuild(request.param)


@pytest.fixture
def bazel() -> FakeBuild:
    return FakeBuild("bazel")


@pytest.fixture
def buck2() -> FakeBuild:
    return FakeBuild("buck2")
