"""Every name the rename header renames is in a shim family the linter checks.

If torch adds a shim outside the configured families, the header would rename it
but the linter would never flag it unprefixed: this test catches that drift.
"""

from __future__ import annotations

import re
from pathlib import Path

from shimkit.config import ShimConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
_DEFINE = re.compile(r"^#define (\w+) SHIMKIT_PASTE\(", re.M)


def renamed_names() -> list[str]:
    text = (ROOT / "shims" / "aoti_shim_rename.h").read_text()
    return _DEFINE.findall(text)


def uncovered(names: list[str], config: ShimConfig) -> list[str]:
    return [name for name in names if not config.is_family(name)]


def test_header_names_all_in_families() -> None:
    names = renamed_names()
    assert len(names) > 700
    assert uncovered(names, load_config(ROOT / "rules" / "shim_symbol_prefix.bzl")) == []


def test_narrow_families_are_caught(tmp_path: Path) -> None:
    """Negative control: with only `aoti_torch_` configured, the check reports the rest."""
    source = (ROOT / "rules" / "shim_symbol_prefix.bzl").read_text()
    narrowed = re.sub(
        r"SHIM_SYMBOL_FAMILIES = \[[^\]]*\]", 'SHIM_SYMBOL_FAMILIES = ["aoti_torch_"]', source
    )
    (tmp_path / "p.bzl").write_text(narrowed)
    missing = uncovered(renamed_names(), load_config(tmp_path / "p.bzl"))
    assert "aoti_record_function_start" in missing
    assert any(name.startswith("torch_") for name in missing)
