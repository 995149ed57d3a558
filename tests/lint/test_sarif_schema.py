"""`shimkit lint --format sarif` validates against the official SARIF 2.1.0 schema.

The schema is OASIS's sarif-2.1.0-rtm.5 JSON schema as Microsoft ships it in the
npm package @microsoft/jest-sarif (package.json; `make` installs it), validated
with jsonschema (requirements.lock). What GitHub code scanning ingests must pass it.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "node_modules" / "@microsoft" / "jest-sarif" / "lib" / "schemas"
SCHEMA_FILE = SCHEMA / "sarif-2.1.0-rtm.5.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    if not SCHEMA_FILE.is_file():
        pytest.fail(f"{SCHEMA_FILE} missing: run `make` (npm ci installs the SARIF schema)")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture
def sarif_log(run_shimkit, elf_dir: Path, cache_dir: Path, tmp_path: Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    # Findings of several rules, an unreadable input, and an image inside a container.
    container = tmp_path / "model.pt2"
    with zipfile.ZipFile(container, "w") as z:
        z.write(elf_dir / "libimports_unprefixed.so", "data/aotinductor/model/x.wrapper.so")
    inputs = [
        "libimports_unprefixed.so",
        "libimports_weak_unprefixed.so",
        "needs_torch.wrapper.so",
        "missing.so",
        str(container),
    ]
    proc = run_shimkit(
        ["lint", "--no-reference", "--format", "sarif", *inputs],
        cwd=elf_dir,
        env={"SHIMKIT_CACHE_DIR": str(cache_dir)},
    )
    assert proc.stdout, proc.stderr
    log: dict[str, Any] = json.loads(proc.stdout)
    return log


def errors(validator: jsonschema.protocols.Validator, log: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]


def test_sarif_output_is_valid_sarif_2_1_0(
    validator: jsonschema.protocols.Validator, sarif_log: dict[str, Any]
) -> None:
    assert errors(validator, sarif_log) == []
    results = sarif_log["runs"][0]["results"]
    assert len(results) >= 4  # the check saw real content, not an empty log
    assert any("logicalLocations" in loc for r in results for loc in r["locations"])


def test_schema_check_catches_invalid_sarif(
    validator: jsonschema.protocols.Validator, sarif_log: dict[str, Any]
) -> None:
    # Negative controls: an unknown level, a missing version, a bad ruleIndex type.
    bad_level = copy.deepcopy(sarif_log)
    bad_level["runs"][0]["results"][0]["level"] = "fatal"
    no_version = copy.deepcopy(sarif_log)
    del no_version["version"]
    bad_index = copy.deepcopy(sarif_log)
    bad_index["runs"][0]["results"][0]["ruleIndex"] = "SK001"
    for broken in (bad_level, no_version, bad_index):
        assert errors(validator, broken), "the schema accepted a broken log"
