"""A consumer's own prefix file reaches the macros, on both fakes; the Buck2 docs snippet works.

`@shimkit_config` is the repository (Bazel) or cell (Buck2) that holds the prefix file
defs.bzl loads. Pointing it at examples/acme (prefix acme_) must change every shim
library's defines; pointing it at shimkit's rules/ (the default) must not give acme's.
docs/adopting.md's Buck2 BUCK snippet is evaluated as written, with acme's prefix file as
the `shimkit_config` cell. Under Bazel the macros declare rules_cc's cc_library, not the
native rule (which Bazel 9 no longer has).
"""

from __future__ import annotations

import re

import bzl_checks as checks
import pytest
from bzl_harness import BACKENDS, BAZEL, BUCK2, DEFAULT_REPOS, REPO_ROOT, FakeBuild
from shimkit.config import load_config

ACME = REPO_ROOT / "examples" / "acme"
ADOPTING = REPO_ROOT / "docs" / "adopting.md"


def acme_world(backend: str) -> FakeBuild:
    return FakeBuild(backend, repos={**DEFAULT_REPOS, "shimkit_config": str(ACME)})


def shim_defines(world: FakeBuild) -> tuple[list[str], list[str]]:
    targets = checks.build(world, 'shimkit_shim_library(name = "s", srcs = ["s.cc"])\n')
    shim = targets["s"]
    return checks.private_defines(world, shim), checks.exported_defines(world, shim)


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumer_prefix_file_reaches_the_macros(backend: str) -> None:
    acme = load_config(ACME / "shim_symbol_prefix.bzl")
    world = acme_world(backend)
    want = [f"{acme.define}={acme.prefix}"]
    private, exported = shim_defines(world)
    assert want[0] in private and want[0] in exported, (private, exported)
    assert world.symbol("//rules:defs.bzl", "SHIM_SYMBOL_PREFIX") == acme.prefix
    assert world.symbol("//rules:defs.bzl", "SHIM_PREFIX_DEFINES") == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_control_default_config_is_not_the_consumers(backend: str) -> None:
    acme = load_config(ACME / "shim_symbol_prefix.bzl")
    own = load_config(REPO_ROOT / "rules" / "shim_symbol_prefix.bzl")
    assert own.prefix != acme.prefix
    private, exported = shim_defines(FakeBuild(backend))
    assert f"{own.define}={own.prefix}" in private
    assert not [d for d in private + exported if d.endswith("=" + acme.prefix)]


def _doc_block_after(marker: str, language: str) -> str:
    text = ADOPTING.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert match, f"no ```{language} block after {marker!r} in {ADOPTING}"
    return match.group(1)


def test_buck2_snippet_of_the_docs() -> None:
    cells = _doc_block_after("## Buck2", "ini")
    assert re.search(r"(?m)^\s*shimkit_config = root$", cells), cells
    assert re.search(r"(?m)^\s*rules_cc = \S+/third_party/rules_cc_stub$", cells), cells
    snippet = _doc_block_after("A `BUCK` file then", "starlark")
    world = acme_world(BUCK2)
    world.run_build(snippet, package="acme")
    (shim,) = world.calls
    acme = load_config(ACME / "shim_symbol_prefix.bzl")
    flag = f"-D{acme.define}={acme.prefix}"
    assert shim.kind == "cxx_library" and shim.get("link_whole") is True
    assert flag in shim.get("preprocessor_flags")
    assert flag in shim.get("exported_preprocessor_flags")


# A rules_cc whose cc_library marks what it declares: proves the macros go through it.
_MARKING_RULES_CC = """
def cc_library(**attrs):
    native.cc_library(**dict(attrs, tags = attrs.get("tags", []) + ["via-rules-cc"]))
"""


def _via_rules_cc(defs_source: str | None = None) -> bool:
    stub = DEFAULT_REPOS["rules_cc"] + "/cc/defs.bzl"
    overrides = {stub: _MARKING_RULES_CC}
    if defs_source is not None:
        overrides["rules/defs.bzl"] = defs_source
    world = FakeBuild(BAZEL, overrides=overrides)
    targets = checks.build(world, 'shimkit_cxx_library(name = "l", srcs = ["l.cc"])\n')
    return "via-rules-cc" in targets["l"].get("tags", [])


def test_bazel_macros_declare_rules_ccs_cc_library() -> None:
    assert _via_rules_cc()
    # Negative control: the same macros calling the native rule are caught.
    source = (REPO_ROOT / "rules" / "defs.bzl").read_text(encoding="utf-8")
    anchor = "        cc_library(**_bazel_attrs(spec, kind))"
    assert source.count(anchor) == 1
    native = "        native.cc_library(**_bazel_attrs(spec, kind))"
    assert not _via_rules_cc(source.replace(anchor, native))
