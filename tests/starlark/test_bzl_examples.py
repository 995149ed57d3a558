"""The repository's own BUILD files and the public helpers of defs.bzl, on the fakes.

examples/basic/BUILD.bazel is what users copy: evaluated for real, its shim library must
carry the prefix define in both lists and link whole, and its control must not link whole.
"""

from __future__ import annotations

import bzl_checks as checks
import pytest
from bzl_harness import BAZEL, BUCK2, REPO_ROOT, FakeBuild

EXAMPLE = "examples/basic/BUILD.bazel"


def check_example(world: FakeBuild) -> None:
    world.run_build_file(EXAMPLE)
    targets = world.targets("examples/basic")
    want = checks.prefix_defines(world)
    shim, control = targets["example_shim_lib"], targets["example_shim_lib_control"]
    for target in (shim, control):
        assert set(want) <= set(target.get("local_defines")), target.attrs
        assert set(want) <= set(target.get("defines")), target.attrs
    assert shim.get("alwayslink") is True
    assert control.get("alwayslink") is False
    library = targets["libexample_shims.so"]
    assert library.kind == "cc_binary" and library.get("linkshared") is True
    assert "-Wl,--gc-sections" in library.get("linkopts")
    assert library.get("deps") == [":example_shim_lib"]


def test_example_build_file() -> None:
    check_example(FakeBuild(BAZEL))


def test_example_build_file_control() -> None:
    """Negative control: with link_whole ignored by the macro, the example check fails."""
    source = (REPO_ROOT / "rules" / "defs.bzl").read_text(encoding="utf-8")
    anchor = 'alwayslink = spec["link_whole"]'
    assert source.count(anchor) == 1
    mutated = source.replace(anchor, "alwayslink = False")
    with pytest.raises(AssertionError):
        check_example(FakeBuild(BAZEL, overrides={"rules/defs.bzl": mutated}))


def test_shims_build_file() -> None:
    world = FakeBuild(BAZEL)
    world.run_build_file("shims/BUILD.bazel")
    assert "rename_header" in world.targets("shims")


@pytest.mark.parametrize(
    ("label", "twin"),
    [
        (":x", ":x_aten"),
        ("x", "x_aten"),
        ("//pkg:x", "//pkg:x_aten"),
        ("//pkg", "//pkg:pkg_aten"),
        ("//a/b/c", "//a/b/c:c_aten"),
        ("//:top", "//:top_aten"),
        ("@repo//pkg:x", "@repo//pkg:x_aten"),
        ("@repo//pkg", "@repo//pkg:pkg_aten"),
        ("@repo", "@repo//:repo_aten"),
        ("cell//pkg:x", "cell//pkg:x_aten"),
    ],
)
def test_aten_twin_label_forms(label: str, twin: str) -> None:
    assert FakeBuild(BAZEL).call("//rules:defs.bzl", "aten_twin", label) == twin


@pytest.mark.parametrize("label", ["", "//"])
def test_aten_twin_rejects_nonsense(label: str) -> None:
    with pytest.raises(checks.StarlarkFail, match="aten_twin"):
        FakeBuild(BAZEL).call("//rules:defs.bzl", "aten_twin", label)


def test_two_entry_define_and_trailing_define() -> None:
    t = checks.build(
        FakeBuild(BAZEL),
        'shimkit_cxx_library(name = "d", preprocessor_flags = ["-D", "TWO", "-DONE"])\n',
    )["d"]
    assert t.get("local_defines") == ["TWO", "ONE"] and t.get("copts") == []
    checks.expect_fail(
        FakeBuild(BAZEL),
        'shimkit_cxx_library(name = "d", preprocessor_flags = ["-DA", "-D"])\n',
        "-D",
    )


@pytest.mark.parametrize("attr", ["testonly", "features", "strip_include_prefix"])
def test_bazel_only_attributes_fail_on_buck2(attr: str) -> None:
    """docs/rules.md: these have no Buck2 equivalent and fail at load time under Buck2."""
    value = "True" if attr == "testonly" else ('["x"]' if attr == "features" else '"inc"')
    body = f'shimkit_cxx_library(name = "b2", {attr} = {value})\n'
    checks.expect_fail(FakeBuild(BUCK2), body, '"b2"', attr)
    target = checks.build(FakeBuild(BAZEL), body)["b2"]  # control: Bazel takes it
    assert attr in target.attrs


def test_select_is_not_mapped_silently() -> None:
    """A non-list deps value (e.g. select()) cannot be mapped to twins: load-time failure."""
    checks.expect_fail(
        FakeBuild(BAZEL),
        'shimkit_cxx_library(name = "s", aten_mode = "both", deps = {"k": ":v"})\n',
        '"s"',
        "plain list",
    )
