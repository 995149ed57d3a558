"""SARIF fit for code scanning: regions, %SRCROOT%-relative URIs, help links into this
version's docs (configurable), fingerprints that survive another checkout and a recompile,
skipped rules named; and the text summary names skipped rules and why."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

from shimkit import DOCS_URL, __version__
from shimkit.checks import RULES

INPUTS = ["libimports_unprefixed.so", "needs_torch.wrapper.so", "missing.so"]


def sarif(run_shimkit, cwd: Path, *args: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    proc = run_shimkit(["lint", "--no-reference", "--format", "sarif", *args], cwd=cwd)
    assert proc.stdout, proc.stderr
    log: dict[str, Any] = json.loads(proc.stdout)
    return log["runs"][0]


def physical_locations(run: dict[str, Any]) -> list[dict[str, Any]]:
    found = [loc["physicalLocation"] for r in run["results"] for loc in r["locations"]]
    for note in run["invocations"][0]["toolExecutionNotifications"]:
        found += [loc["physicalLocation"] for loc in note.get("locations", [])]
    return found


def test_every_location_has_a_region_and_a_relative_uri(run_shimkit, elf_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run = sarif(run_shimkit, elf_dir, *INPUTS)
    locations = physical_locations(run)
    assert len(locations) >= 3  # two findings' files and the unreadable input
    for physical in locations:
        assert physical["region"] == {"startLine": 1}
        artifact = physical["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%" and artifact["uri"] in INPUTS
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == f"file://{elf_dir}/"
    # Absolute inputs inside the source root are relative too; outside, file:// URIs.
    absolute = sarif(run_shimkit, elf_dir.parent, str(elf_dir / INPUTS[0]))
    (result,) = absolute["results"]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": f"{elf_dir.name}/{INPUTS[0]}", "uriBaseId": "%SRCROOT%"}
    rooted = sarif(run_shimkit, elf_dir, "--source-root", str(elf_dir / "x"), INPUTS[0])
    artifact = rooted["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": f"file://{elf_dir / INPUTS[0]}"}  # control: outside the root


def test_help_links_point_at_this_versions_docs(run_shimkit, elf_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run = sarif(run_shimkit, elf_dir, INPUTS[0])
    rules = run["tool"]["driver"]["rules"]
    assert DOCS_URL.endswith(f"/v{__version__}/docs/")
    catalogue = (Path(__file__).resolve().parents[2] / "docs" / "lint-rules.md").read_text()
    for rule, descriptor in zip(RULES, rules, strict=True):
        anchor = f"{rule.id.lower()}-{rule.name}"
        assert descriptor["helpUri"] == f"{DOCS_URL}lint-rules.md#{anchor}"
        assert f"## {rule.id} {rule.name}" in catalogue  # the anchor GitHub renders
    moved = sarif(
        run_shimkit, elf_dir, "--help-uri-base", "https://docs.example/shimkit", INPUTS[0]
    )
    assert moved["tool"]["driver"]["rules"][0]["helpUri"] == (
        "https://docs.example/shimkit/lint-rules.md#sk001-unprefixed-shim-import"
    )


def test_fingerprints_survive_another_checkout_and_a_recompile(  # type: ignore[no-untyped-def]
    run_shimkit, elf_dir: Path, tmp_path: Path
) -> None:
    def checkout(root: Path, blob_hash: str) -> Path:
        (root / "out").mkdir(parents=True)
        shutil.copy(elf_dir / INPUTS[0], root / "out" / "lib.so")
        with zipfile.ZipFile(root / "out" / "m.pt2", "w") as z:
            z.write(elf_dir / INPUTS[0], f"m/data/aotinductor/model/{blob_hash}.wrapper.so")
        return root

    def fingerprints(root: Path, *args: str) -> list[str]:
        run = sarif(run_shimkit, root, *args)
        return sorted(r["partialFingerprints"]["shimkitFinding/v2"] for r in run["results"])

    first = checkout(tmp_path / "a", "c" + "a" * 51)
    second = checkout(tmp_path / "b", "c" + "b" * 51)  # another place, a recompiled blob
    one = fingerprints(first, "out/")
    assert len(one) >= 2 and all(":out/" in f for f in one)
    assert any("{hash}.wrapper.so" in f for f in one)  # the blob, whatever its hash
    assert fingerprints(first, "out/") == one  # the same run again
    assert fingerprints(second, str(second / "out")) == one  # absolute paths, other checkout
    # control: the same finding in another file is another fingerprint
    (second / "out" / "lib.so").rename(second / "out" / "lib2.so")
    moved = fingerprints(second, "out/")
    assert moved != one and "SK001:out/lib2.so:aoti_torch_get_dim" in moved


def test_skipped_rules_are_named_with_the_reason(run_shimkit, elf_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run = sarif(run_shimkit, elf_dir, "libdistinct.so")
    notes = run["invocations"][0]["toolExecutionNotifications"]
    skipped = {
        n["associatedRule"]["id"]: n["message"]["text"] for n in notes if n["level"] == "note"
    }
    assert set(skipped) == {"SK003", "SK004"}
    assert "no reference library" in skipped["SK003"] and "no provider" in skipped["SK004"]
    text = run_shimkit(["lint", "--no-reference", "libdistinct.so"], cwd=elf_dir).stdout
    (line,) = text.splitlines()  # clean: still one line, naming what did not run and why
    assert "clean (prefix" in line
    assert "skipped: SK004 (no provider" in line and "SK003 (no reference library" in line
    # control: with a provider and a reference nothing is skipped
    full = run_shimkit(
        ["lint", "--reference", "libreference.so", "libdistinct.so", "libshim_prefixed.so"],
        cwd=elf_dir,
    ).stdout
    assert "skipped" not in full, full
