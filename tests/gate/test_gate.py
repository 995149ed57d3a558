"""`shimkit gate`: drift -> 4, update -> 0, suppressions, expiry -> 32, hard failures -> 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shimkit.exitcodes import (
    EXIT_BASELINE_DRIFT,
    EXIT_ERROR,
    EXIT_EXPIRED_SUPPRESSION,
    EXIT_UNPREFIXED,
)


@pytest.fixture
def gate(run_shimkit, tmp_path: Path):  # type: ignore[no-untyped-def]
    def run(*args: str):  # type: ignore[no-untyped-def]
        env = {"SHIMKIT_CACHE_DIR": str(tmp_path / "cache")}
        return run_shimkit(
            ["gate", "--no-reference", "--baseline", "baseline.json", *args], cwd=tmp_path, env=env
        )

    return run


SUPPRESS_TOML = """
[[suppression]]
rule = "SK001"
symbol = "aoti_torch_get_*"
artifact = "out/*.so"
owner = "@shim-team"
reason = "legacy library, migrating in Q3"
expires = {expires}
"""


def test_update_then_pass_and_deterministic(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    workdir("libshim_prefixed.so")
    first = gate("--update", "out")
    assert first.returncode == 0, first.stdout + first.stderr
    text = (tmp_path / "baseline.json").read_text()
    document = json.loads(text)
    assert document["schema"] == "shimkit.baseline/v1"
    paths = [a["path"] for a in document["artifacts"]]
    assert paths == ["out/libimports_prefixed.so", "out/libshim_prefixed.so"]
    assert gate("--update", "out/libshim_prefixed.so", "out/libimports_prefixed.so").returncode == 0
    assert (tmp_path / "baseline.json").read_text() == text  # order-independent, byte-stable
    passing = gate("out")
    assert passing.returncode == 0 and "match baseline.json" in passing.stdout


def test_new_symbol_is_drift(gate, workdir) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so", "liba.so")
    assert gate("--update", "out").returncode == 0
    workdir("libimports_prefixed_missing.so", "liba.so")  # another prefixed import
    proc = gate("out")
    assert proc.returncode == EXIT_BASELINE_DRIFT, proc.stdout
    assert "+ import" in proc.stdout and "aoti_torch_get_sizes" in proc.stdout
    assert "- import" in proc.stdout  # the old one is reported as gone too


def test_new_violation_sets_drift_and_rule_bit(gate, workdir) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so", "liba.so")
    assert gate("--update", "out").returncode == 0
    workdir("libimports_unprefixed.so", "liba.so")
    proc = gate("out")
    assert proc.returncode == EXIT_BASELINE_DRIFT | EXIT_UNPREFIXED
    assert "+ violation SK001 aoti_torch_get_dim" in proc.stdout
    assert "--update" in proc.stdout


def test_accepted_violation_in_baseline_passes(gate, workdir) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_unprefixed.so")
    assert gate("--update", "out").returncode == 0
    assert gate("out").returncode == 0


def test_removed_symbols_alone_pass_but_gone_artifact_fails(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_unprefixed.so", "liba.so")
    workdir("libshim_prefixed.so", "libb.so")
    assert gate("--update", "out").returncode == 0
    workdir("libdistinct.so", "liba.so")  # liba lost its import and its violation
    tighter = gate("out")
    assert tighter.returncode == 0, tighter.stdout
    assert "- violation SK001" in tighter.stdout
    (tmp_path / "out" / "libb.so").unlink()
    gone = gate("out")
    assert gone.returncode == EXIT_BASELINE_DRIFT and "gone" in gone.stdout


def test_suppression_hides_and_expiry_fails(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_unprefixed.so")
    supp = tmp_path / "supp.toml"
    supp.write_text(SUPPRESS_TOML.format(expires="2030-01-01"))
    assert gate("--update", "--suppressions", "supp.toml", "out").returncode == 0
    baseline = json.loads((tmp_path / "baseline.json").read_text())
    assert baseline["artifacts"][0]["violations"] == []
    hidden = gate("--suppressions", "supp.toml", "--today", "2029-12-31", "out")
    assert hidden.returncode == 0, hidden.stdout
    assert "1 suppressed" in hidden.stdout
    # negative control: without the suppression the violation is new
    assert gate("out").returncode == EXIT_BASELINE_DRIFT | EXIT_UNPREFIXED
    expired = gate("--suppressions", "supp.toml", "--today", "2030-01-02", "out")
    assert expired.returncode & EXIT_EXPIRED_SUPPRESSION
    assert expired.returncode & EXIT_BASELINE_DRIFT  # an expired entry no longer hides
    assert "expired" in expired.stdout and "@shim-team" in expired.stdout


def test_json_suppressions_and_gate_json(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_unprefixed.so")
    entry = {
        "rule": "unprefixed-shim-import",
        "symbol": "aoti_torch_get_dim",
        "owner": "@me",
        "reason": "r",
        "expires": "2000-01-01",
    }
    (tmp_path / "supp.json").write_text(json.dumps({"suppressions": [entry]}))
    assert gate("--update", "out").returncode == 0
    proc = gate("--suppressions", "supp.json", "--format", "json", "out")
    document = json.loads(proc.stdout)
    assert document["schema"] == "shimkit.gate/v1"
    assert document["exit_code"] == proc.returncode == EXIT_EXPIRED_SUPPRESSION
    assert document["expired_suppressions"][0]["rule"] == "SK001"


def test_missing_baseline_is_hard_failure(gate, workdir) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    proc = gate("out")
    assert proc.returncode == EXIT_ERROR
    assert "baseline.json" in proc.stdout and "does not exist" in proc.stdout


def test_empty_symbol_table_is_hard_failure(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    workdir("libempty.so")
    update = gate("--update", "out")
    assert update.returncode == EXIT_ERROR
    assert "libempty.so" in update.stdout and not (tmp_path / "baseline.json").exists()
    (tmp_path / "out" / "libempty.so").unlink()
    assert gate("--update", "out").returncode == 0
    workdir("libempty.so")
    assert gate("out").returncode & EXIT_ERROR


def test_unreadable_input_and_empty_input_are_hard_failures(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    assert gate("--update", "out").returncode == 0
    (tmp_path / "junk.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9)
    proc = gate("out", "junk.so")
    assert proc.returncode & EXIT_ERROR and "junk.so" in proc.stdout
    (tmp_path / "empty").mkdir()
    nothing = gate("empty")
    assert nothing.returncode & EXIT_ERROR and "no ELF artifacts found" in nothing.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[suppression]]\nrule = 'SK001'\n", "missing symbol, owner, reason, expires"),
        (SUPPRESS_TOML.format(expires='"soon"'), "'expires' must be a date"),
        (SUPPRESS_TOML.format(expires="2030-01-01").replace("SK001", "SK999"), "unknown rule"),
        ("not = [toml", "not valid TOML"),
    ],
)
def test_bad_suppressions_file_is_one_line_error(
    gate, workdir, tmp_path: Path, content: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    (tmp_path / "supp.toml").write_text(content)
    proc = gate("--update", "--suppressions", "supp.toml", "out")
    assert proc.returncode == EXIT_ERROR
    assert message in proc.stderr and "supp.toml" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr


def test_corrupt_baseline_is_hard_failure(gate, workdir, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workdir("libimports_prefixed.so")
    (tmp_path / "baseline.json").write_text('{"schema": "other"}')
    proc = gate("out")
    assert proc.returncode == EXIT_ERROR and "not a shimkit.baseline/v1" in proc.stdout
