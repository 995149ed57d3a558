"""Negative controls: each property check must fail on a copy of defs.bzl that breaks it.

A mutation replaces one exact snippet of rules/defs.bzl. If the snippet is gone (the
macros were refactored), the test fails and names the snippet: update the mutation to
the new code, do not delete it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bzl_checks as checks
import pytest
from bzl_harness import BACKENDS, BAZEL, BUCK2, REPO_ROOT, BzlError, FakeBuild

DEFS_PATH = "rules/defs.bzl"


@dataclass(frozen=True)
class Mutation:
    id: str
    old: str
    new: str
    check: Callable[[FakeBuild], None]
    backends: tuple[str, ...] = BACKENDS


MUTATIONS = [
    Mutation(
        "link_whole-ignored-bazel",
        'alwayslink = spec["link_whole"]',
        "alwayslink = False",
        checks.check_link_whole,
        (BAZEL,),
    ),
    Mutation(
        "link_whole-ignored-buck2",
        'attrs["name"] = spec["name"]',
        'attrs["name"] = spec["name"]\n    attrs["link_whole"] = False',
        checks.check_link_whole,
        (BUCK2,),
    ),
    Mutation(
        "defines-swapped",
        "local_defines = local_defines,\n        defines = defines,",
        "local_defines = defines,\n        defines = local_defines,",
        checks.check_define_routing,
        (BAZEL,),
    ),
    Mutation(
        "aten-flag-not-exported",
        "exported_preprocessor_flags = _with_flags(exported_preprocessor_flags, [ATEN_FLAG]),",
        "exported_preprocessor_flags = exported_preprocessor_flags,",
        checks.check_aten_defines,
    ),
    Mutation(
        "aten-flag-not-private",
        "preprocessor_flags = _with_flags(preprocessor_flags, [ATEN_FLAG]),",
        "preprocessor_flags = preprocessor_flags,",
        checks.check_aten_defines,
    ),
    Mutation(
        "neutral-deps-ignored",
        "if dep in neutral:",
        "if False:",
        checks.check_dep_mapping,
    ),
    Mutation(
        "deps-not-mapped",
        "out.append(twin)",
        "out.append(dep)",
        checks.check_dep_mapping,
    ),
    Mutation(
        "missing-twin-not-checked",
        "if local != None and not _rule_exists(local + ATEN_SUFFIX):",
        "if False:",
        checks.check_missing_twin,
    ),
    Mutation(
        "unknown-attribute-not-checked",
        "if key not in COMMON_ATTRS:",
        "if False:",
        checks.check_unknown_attribute,
    ),
    Mutation(
        "bad-aten-mode-accepted",
        "if aten_mode not in ATEN_MODES:",
        "if False:",
        checks.check_bad_aten_mode,
    ),
    Mutation(
        "portable-variant-dropped",
        'if aten_mode in ("portable", "both"):',
        'if aten_mode == "portable":',
        checks.check_aten_modes,
    ),
    Mutation(
        "shim-prefix-not-private",
        "_with_flags(preprocessor_flags, SHIM_PREFIX_FLAGS),",
        "preprocessor_flags,",
        checks.check_shim_library,
    ),
    Mutation(
        "shim-prefix-not-exported",
        "_with_flags(exported_preprocessor_flags, SHIM_PREFIX_FLAGS),",
        "exported_preprocessor_flags,",
        checks.check_shim_library,
    ),
    Mutation(
        "shim-link-whole-optional",
        "if link_whole != True:",
        "if False:",
        checks.check_shim_link_whole_forced,
    ),
]

CASES = [pytest.param(m, b, id=f"{m.id}-{b}") for m in MUTATIONS for b in m.backends]


def _mutated(mutation: Mutation) -> str:
    source = (REPO_ROOT / DEFS_PATH).read_text(encoding="utf-8")
    count = source.count(mutation.old)
    assert count == 1, (
        f"mutation {mutation.id}: expected the snippet {mutation.old!r} once in {DEFS_PATH}, "
        f"found it {count} times; update the mutation to the current macro code"
    )
    return source.replace(mutation.old, mutation.new)


@pytest.mark.parametrize(("mutation", "backend"), CASES)
def test_check_catches_mutation(mutation: Mutation, backend: str) -> None:
    world = FakeBuild(backend, overrides={DEFS_PATH: _mutated(mutation)})
    with pytest.raises(AssertionError):
        mutation.check(world)


@pytest.mark.parametrize(("mutation", "backend"), CASES)
def test_check_passes_unmutated(mutation: Mutation, backend: str) -> None:
    mutation.check(FakeBuild(backend))


def test_prefix_validation_removed_is_caught(tmp_path: Path) -> None:
    """With the prefix check removed, an invalid prefix no longer fails: the check sees it."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "shim_symbol_prefix.bzl").write_text(
        (REPO_ROOT / "rules" / "shim_symbol_prefix.bzl")
        .read_text(encoding="utf-8")
        .replace('SHIM_SYMBOL_PREFIX = "', 'SHIM_SYMBOL_PREFIX = "9', 1),
        encoding="utf-8",
    )
    mutation = Mutation(
        "prefix-not-validated",
        "error = _prefix_error(kind, name, SHIM_SYMBOL_PREFIX)",
        "error = None",
        checks.check_prefix_validated,
    )
    shutil.copy(REPO_ROOT / DEFS_PATH, rules / "defs.bzl")
    for backend in BACKENDS:
        checks.check_prefix_validated(FakeBuild(backend, root=tmp_path))  # the real macro fails
        world = FakeBuild(backend, root=tmp_path, overrides={DEFS_PATH: _mutated(mutation)})
        with pytest.raises(AssertionError):
            checks.check_prefix_validated(world)


def test_mutated_source_still_evaluates() -> None:
    """Mutations must break behaviour, not syntax (else the checks prove nothing)."""
    for mutation in MUTATIONS:
        for backend in mutation.backends:
            world = FakeBuild(backend, overrides={DEFS_PATH: _mutated(mutation)})
            try:
                world.load("//rules:defs.bzl")
            except BzlError as exc:  # pragma: no cover - a broken mutation
                pytest.fail(f"mutation {mutation.id} does not evaluate: {exc}")
