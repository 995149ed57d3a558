"""Each rule against gcc-built ELF files: a failing fixture and a passing control."""

from __future__ import annotations

from pathlib import Path

import pytest
from shimkit.checks.run import LintOptions, run_lint
from shimkit.config import ShimConfig


def rule_ids(
    config: ShimConfig, elf_dir: Path, names: list[str], **options: object
) -> dict[str, list[str]]:
    opts = LintOptions(paths=[str(elf_dir / n) for n in names], references=[], **options)  # type: ignore[arg-type]
    result = run_lint(config, opts)
    assert result.problems == []
    return {
        Path(a.location).name: sorted({f.rule_id for f in a.findings}) for a in result.artifacts
    }


# (failing fixture, expected rule IDs, passing control)
CASES = [
    ("libimports_unprefixed.so", ["SK001"], "libimports_prefixed.so"),
    ("libimports_weak_unprefixed.so", ["SK001"], "libimports_prefixed.so"),
    ("libimports_stable_unprefixed.so", ["SK001"], "libimports_prefixed.so"),
    ("libshim_unprefixed.so", ["SK002"], "libshim_prefixed.so"),
    ("libimports_other_prefix.so", ["SK001"], "libtorchish_names.so"),
    ("libshim_other_prefix.so", ["SK002"], "libtorchish_names.so"),
    ("needs_torch.wrapper.so", ["SK005"], "good.wrapper.so"),
    ("needs_c10.wrapper.so", ["SK005"], "good.wrapper.so"),
    ("cxx_torch.wrapper.so", ["SK006"], "cxx_other.wrapper.so"),
    ("libexecstack.so", ["SK007"], "libdistinct.so"),
    ("norun.wrapper.so", ["SK008"], "good.wrapper.so"),
]


@pytest.mark.parametrize(("bad", "expected", "good"), CASES, ids=[c[0] for c in CASES])
def test_rule_fires_and_control_passes(
    config: ShimConfig, elf_dir: Path, bad: str, expected: list[str], good: str
) -> None:
    found = rule_ids(config, elf_dir, [bad, good])
    assert found[bad] == expected
    assert found[good] == []


def test_sk003_collision_with_given_reference(config: ShimConfig, elf_dir: Path) -> None:
    opts = LintOptions(
        paths=[str(elf_dir / "libcollides.so"), str(elf_dir / "libdistinct.so")],
        references=[str(elf_dir / "libreference.so")],
    )
    result = run_lint(config, opts)
    by_name = {Path(a.location).name: a.findings for a in result.artifacts}
    assert [(f.rule_id, f.symbol) for f in by_name["libcollides.so"]] == [("SK003", "shared_entry")]
    assert by_name["libdistinct.so"] == []


def test_sk004_provider_closure(config: ShimConfig, elf_dir: Path) -> None:
    users = ["libimports_prefixed.so", "libimports_prefixed_missing.so"]
    found = rule_ids(config, elf_dir, users, providers=[str(elf_dir / "libshim_prefixed.so")])
    assert found == {"libimports_prefixed.so": [], "libimports_prefixed_missing.so": ["SK004"]}
    # the provider linted together with its users closes the set the same way
    together = rule_ids(config, elf_dir, [*users, "libshim_prefixed.so"])
    assert together["libimports_prefixed.so"] == []
    assert together["libimports_prefixed_missing.so"] == ["SK004"]


def test_sk009_proxy_executor(config: ShimConfig, elf_dir: Path) -> None:
    found = rule_ids(
        config, elf_dir, ["proxy.wrapper.so", "good.wrapper.so", "libshim_prefixed.so"]
    )
    assert found["proxy.wrapper.so"] == ["SK004", "SK009"]
    assert found["good.wrapper.so"] == []


def test_forced_blob_role(config: ShimConfig, elf_dir: Path) -> None:
    found = rule_ids(config, elf_dir, ["libdistinct.so"], force_blob=True)
    assert found["libdistinct.so"] == ["SK008", "SK010"]


def test_other_prefix_message_names_both_prefixes(config: ShimConfig, elf_dir: Path) -> None:
    result = run_lint(
        config, LintOptions(paths=[str(elf_dir / "libimports_other_prefix.so")], references=[])
    )
    (finding,) = result.findings
    other = "other_" + config.prefix
    assert finding.symbol == f"{other}aoti_torch_get_dim"
    assert f"under prefix {other}, not the configured {config.prefix}" in finding.message
    assert str(config.source) in finding.message
    assert result.exit_code() == 8


def test_sk011_two_owners_named(config: ShimConfig, elf_dir: Path, tmp_path: Path) -> None:
    one, twin = elf_dir / "libshim_prefixed.so", elf_dir / "libshim_prefixed_twin.so"
    found = rule_ids(config, elf_dir, [one.name, twin.name])
    assert found == {one.name: ["SK011"], twin.name: ["SK011"]}
    result = run_lint(config, LintOptions(paths=[str(one), str(twin)], references=[]))
    assert result.exit_code() == 16
    for finding in result.findings:
        assert str(one) in finding.message and str(twin) in finding.message
    # an owner given only as --provider is named too; the linted one gets the finding
    result = run_lint(config, LintOptions(paths=[str(one)], providers=[str(twin)], references=[]))
    assert [(Path(f.location).name, f.rule_id) for f in result.findings] == [(one.name, "SK011")]
    # controls: one library alone; the same library reached through a symlink and as
    # --provider is one owner
    assert rule_ids(config, elf_dir, [one.name]) == {one.name: []}
    link = tmp_path / "libalias.so"
    link.symlink_to(one)
    result = run_lint(config, LintOptions(paths=[str(link)], providers=[str(one)], references=[]))
    assert result.findings == [] and result.exit_code() == 0
