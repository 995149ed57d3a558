"""The macros of rules/defs.bzl, evaluated for real against Bazel and Buck2 fakes.

Every property is a function in bzl_checks; here each runs against the real file on both
back-ends, and (test_bzl_mutations.py) against copies of defs.bzl that break it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import bzl_checks as checks
import pytest
from bzl_harness import BAZEL, BUCK2, REPO_ROOT, FakeBuild

ALL_CHECKS = [
    checks.check_aten_modes,
    checks.check_bad_aten_mode,
    checks.check_link_whole,
    checks.check_define_routing,
    checks.check_headers_and_deps,
    checks.check_aten_defines,
    checks.check_dep_mapping,
    checks.check_missing_twin,
    checks.check_unknown_attribute,
    checks.check_shim_library,
    checks.check_shim_link_whole_forced,
]


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_property_holds(world: FakeBuild, check) -> None:
    check(world)


def test_backend_is_detected(bazel: FakeBuild, buck2: FakeBuild) -> None:
    """One BUILD text gives cc_library under Bazel and cxx_library under Buck2, nothing else."""
    body = 'shimkit_shim_library(name = "s", srcs = ["s.c"], aten_mode = "both")\n'
    assert {c.kind for c in bazel.run_build(checks.LOAD + body, "pkg")} == {"cc_library"}
    assert {c.kind for c in buck2.run_build(checks.LOAD + body, "pkg")} == {"cxx_library"}


def test_bazel_uses_only_cc_library_attributes(bazel: FakeBuild) -> None:
    """No Buck-only name reaches cc_library (the fake rejects unknown attributes)."""
    targets = checks.build(
        bazel,
        'shimkit_shim_library(name = "s", srcs = ["s.c"], headers = ["h.h"],\n'
        '    exported_headers = ["e.h"], exported_deps = ["//x:y"], link_whole = True,\n'
        '    compiler_flags = ["-O2"], linker_flags = ["-lm"], aten_mode = "both")\n',
    )
    buck_only = {
        "headers",
        "exported_headers",
        "exported_deps",
        "link_whole",
        "preprocessor_flags",
        "exported_preprocessor_flags",
        "compiler_flags",
        "linker_flags",
    }
    for target in targets.values():
        assert not buck_only & set(target.attrs), target.attrs


@pytest.mark.parametrize(
    ("attr", "buck2_attr"),
    [("tags", "labels"), ("visibility", "visibility"), ("includes", "public_include_directories")],
)
def test_common_attributes_are_translated(
    bazel: FakeBuild, buck2: FakeBuild, attr: str, buck2_attr: str
) -> None:
    body = f'shimkit_cxx_library(name = "c", {attr} = ["v"], aten_mode = "both")\n'
    on_bazel, on_buck2 = checks.build(bazel, body), checks.build(buck2, body)
    for twin in ("c", "c_aten"):
        assert on_bazel[twin].get(attr) == ["v"], on_bazel[twin].attrs
        assert on_buck2[twin].get(buck2_attr) == ["v"], on_buck2[twin].attrs


def test_shim_prefix_follows_the_source_of_truth(world: FakeBuild, tmp_path: Path) -> None:
    """A copy of rules/ with another valid prefix changes the shim library's defines."""
    root = _rules_copy(tmp_path, 'SHIM_SYMBOL_PREFIX = "acme_"')
    fake = FakeBuild(world.backend, root=root)
    define = fake.symbol(checks.PREFIX_BZL, "SHIM_SYMBOL_PREFIX_DEFINE")
    target = checks.build(fake, 'shimkit_shim_library(name = "s", srcs = ["s.c"])\n')["s"]
    assert f"{define}=acme_" in checks.private_defines(fake, target)
    assert f"{define}=acme_" in checks.exported_defines(fake, target)
    real = checks.prefix_defines(world)
    assert not set(real) & set(checks.private_defines(fake, target)), "old prefix still there"


@pytest.mark.parametrize("bad", ["1abc_", "exec-torch_", "", "with space_", "ünï_"])
def test_invalid_prefix_fails_at_load_time(world: FakeBuild, tmp_path: Path, bad: str) -> None:
    root = _rules_copy(tmp_path, f'SHIM_SYMBOL_PREFIX = "{bad}"')
    checks.check_prefix_validated(FakeBuild(world.backend, root=root))


def test_invalid_prefix_control(world: FakeBuild) -> None:
    """Negative control: the real prefix is valid, so the validity check must fail."""
    with pytest.raises(AssertionError, match="no fail"):
        checks.check_prefix_validated(world)


def test_neutral_dep_must_be_a_dep(world: FakeBuild) -> None:
    checks.expect_fail(
        world,
        'shimkit_cxx_library(name = "n", aten_mode = "both", deps = ["//a:b"],\n'
        '    aten_neutral_deps = ["//a:c"])\n',
        '"n"',
        "//a:c",
    )


def test_cross_package_twins_are_not_checked(world: FakeBuild) -> None:
    """Only same-package twins can be checked at load time; other labels just map."""
    targets = checks.build(
        world, 'shimkit_cxx_library(name = "u", aten_mode = "aten", deps = ["//far:away"])\n'
    )
    assert checks.all_deps(world, targets["u_aten"]) == ["//far:away_aten"]


def test_fake_backends_differ_where_buck2_does(bazel: FakeBuild, buck2: FakeBuild) -> None:
    """A sanity anchor for the two fakes: link flags land where each back-end wants them."""
    body = 'shimkit_cxx_library(name = "l", link_whole = True)\n'
    assert checks.build(bazel, body)["l"].get("alwayslink") is True
    assert checks.build(buck2, body)["l"].get("link_whole") is True
    assert BAZEL != BUCK2


def _rules_copy(tmp_path: Path, prefix_line: str) -> Path:
    """A copy of rules/ whose SHIM_SYMBOL_PREFIX line is replaced by `prefix_line`."""
    rules = tmp_path / "rules"
    shutil.copytree(REPO_ROOT / "rules", rules, ignore=shutil.ignore_patterns("BUILD*"))
    source = rules / "shim_symbol_prefix.bzl"
    lines = source.read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith("SHIM_SYMBOL_PREFIX = ")]
    assert len(hits) == 1, "rules/shim_symbol_prefix.bzl must assign SHIM_SYMBOL_PREFIX once"
    lines[hits[0]] = prefix_line
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path
