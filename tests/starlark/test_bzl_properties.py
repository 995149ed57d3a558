"""Property tests (hypothesis) of the pure helpers in defs.bzl against Python references."""

from __future__ import annotations

import bzl_checks as checks
import pytest
from bzl_harness import BAZEL, FakeBuild
from hypothesis import given, settings
from hypothesis import strategies as st

WORLD = FakeBuild(BAZEL)  # defs.bzl is loaded once and cached; each call is a fresh BUILD

FLAG = st.sampled_from(
    ["-DA", "-DB=1", '-DS="x y"', "-D", "NAME", "V=2", "-I/inc", "-O2", "-include", "h.h", "-U"]
)
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
PACKAGE = st.lists(NAME, min_size=1, max_size=3).map("/".join)


def split_reference(flags: list[str]) -> tuple[list[str], list[str]] | None:
    """-DX and "-D X" are defines, everything else in order; None for a trailing -D."""
    defines: list[str] = []
    others: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag == "-D":
            if i + 1 == len(flags):
                return None
            defines.append(flags[i + 1])
            i += 2
            continue
        (defines if flag.startswith("-D") else others).append(
            flag[2:] if flag.startswith("-D") else flag
        )
        i += 1
    return defines, others


@settings(max_examples=150, deadline=None)
@given(st.lists(FLAG, max_size=8))
def test_split_defines_matches_reference(flags: list[str]) -> None:
    want = split_reference(flags)
    if want is None:
        with pytest.raises(checks.StarlarkFail, match="-D"):
            WORLD.call("//rules:defs.bzl", "shimkit_internal.split_defines", flags)
        return
    got = WORLD.call("//rules:defs.bzl", "shimkit_internal.split_defines", flags)
    assert (list(got[0]), list(got[1])) == want


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["", "@ext", "cell"]), PACKAGE, st.one_of(st.none(), NAME))
def test_aten_twin_reference(repo: str, package: str, name: str | None) -> None:
    label = f"{repo}//{package}" + (f":{name}" if name else "")
    target = name or package.split("/")[-1]
    want = f"{repo}//{package}:{target}_aten"
    assert WORLD.call("//rules:defs.bzl", "aten_twin", label) == want


def test_reference_control() -> None:
    """The reference is not vacuous: it tells -D pairs from other flags."""
    assert split_reference(["-D", "X", "-O2", "-DY"]) == (["X", "Y"], ["-O2"])
    assert split_reference(["-DA", "-D"]) is None
