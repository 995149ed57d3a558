"""`shimkit lint` end to end: exit bits, text, JSON (golden), SARIF structure."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from shimkit.exitcodes import (
    EXIT_COLLISION,
    EXIT_ERROR,
    EXIT_EXPIRED_SUPPRESSION,
    EXIT_OTHER_VIOLATION,
    EXIT_UNPREFIXED,
    EXIT_USAGE,
)
from shimkit.progress import ProgressBar

GOLDEN = Path(__file__).parent / "golden" / "lint_v1.json"
GOLDEN_INPUTS = [
    "good.wrapper.so",
    "libimports_unprefixed.so",
    "libimports_weak_unprefixed.so",
    "libshim_prefixed.so",
    "norun.wrapper.so",
    "missing.so",
]


@pytest.fixture
def lint(run_shimkit, elf_dir: Path, cache_dir: Path):  # type: ignore[no-untyped-def]
    def run(*args: str, cwd: Path | None = None):  # type: ignore[no-untyped-def]
        return run_shimkit(
            ["lint", *args], cwd=cwd or elf_dir, env={"SHIMKIT_CACHE_DIR": str(cache_dir)}
        )

    return run


def test_clean_is_one_line(lint) -> None:  # type: ignore[no-untyped-def]
    proc = lint("--no-reference", "libimports_prefixed.so", "libshim_prefixed.so")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("\n") == 1 and "2 artifact(s)" in proc.stdout
    assert "clean" in proc.stdout and proc.stderr == ""
    quiet = lint("--no-reference", "--quiet", "libshim_prefixed.so")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_unprefixed_sets_bit_8_and_shows_fix(lint, config) -> None:  # type: ignore[no-untyped-def]
    proc = lint("--no-reference", "libimports_unprefixed.so")
    assert proc.returncode == EXIT_UNPREFIXED
    assert "SK001 unprefixed-shim-import" in proc.stdout
    assert "aoti_torch_get_dim" in proc.stdout and "fix:" in proc.stdout
    assert "\033[" not in proc.stdout  # no colour when stdout is not a tty


def test_collision_sets_bit_16(lint) -> None:  # type: ignore[no-untyped-def]
    proc = lint("--reference", "libreference.so", "libcollides.so")
    assert proc.returncode == EXIT_COLLISION, proc.stdout
    clean = lint("--reference", "libreference.so", "libdistinct.so")
    assert clean.returncode == 0, clean.stdout


def test_input_errors_never_stop_other_files(lint, elf_dir: Path) -> None:  # type: ignore[no-untyped-def]
    (elf_dir / "notelf.so").write_text("just text\n")
    proc = lint(
        "--no-reference", "notelf.so", "nope.so", "libimports_unprefixed.so", "libexecstack.so"
    )
    assert proc.returncode == EXIT_ERROR | EXIT_UNPREFIXED | EXIT_OTHER_VIOLATION
    assert "notelf.so" in proc.stdout and "nope.so" in proc.stdout
    assert "SK001" in proc.stdout and "SK007" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_nothing_to_lint_is_an_error(lint, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = lint("--no-reference", str(empty))
    assert proc.returncode == EXIT_ERROR and "no ELF artifacts found" in proc.stdout


def test_usage_errors_exit_2(lint) -> None:  # type: ignore[no-untyped-def]
    assert lint().returncode == EXIT_USAGE
    assert lint("--format", "xml", "good.wrapper.so").returncode == EXIT_USAGE
    both = lint("--no-reference", "--reference", "x.so", "good.wrapper.so")
    assert both.returncode == EXIT_ERROR and "exclude each other" in both.stderr


def test_bad_reference_is_one_line_error(lint) -> None:  # type: ignore[no-untyped-def]
    proc = lint("--reference", "absent.so", "good.wrapper.so")
    assert proc.returncode == EXIT_ERROR
    assert proc.stderr.strip().count("\n") == 0 and "absent.so" in proc.stderr


def test_output_file_and_stderr_verdict(lint, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    proc = lint(
        "--no-reference", "--format", "json", "--output", str(out), "libimports_unprefixed.so"
    )
    assert proc.returncode == EXIT_UNPREFIXED and proc.stdout == ""
    assert json.loads(out.read_text())["exit_code"] == EXIT_UNPREFIXED
    assert "SK001" in proc.stderr


def test_lint_suppressions(lint, elf_dir: Path) -> None:  # type: ignore[no-untyped-def]
    entry = (
        '[[suppression]]\nrule = "SK001"\nsymbol = "aoti_torch_get_dim"\nowner = "@o"\n'
        'reason = "r"\nexpires = {date}\n'
    )
    (elf_dir / "live.toml").write_text(entry.format(date="2999-01-01"))
    (elf_dir / "dead.toml").write_text(entry.format(date="2000-01-01"))
    live = lint("--no-reference", "--suppressions", "live.toml", "libimports_unprefixed.so")
    assert live.returncode == 0, live.stdout
    assert "1 finding(s) suppressed" in live.stdout
    dead = lint("--no-reference", "--suppressions", "dead.toml", "libimports_unprefixed.so")
    assert dead.returncode == EXIT_UNPREFIXED | EXIT_EXPIRED_SUPPRESSION
    assert "has expired" in dead.stdout and "SK001" in dead.stdout


def test_json_matches_golden(lint) -> None:  # type: ignore[no-untyped-def]
    proc = lint("--no-reference", "--format", "json", *GOLDEN_INPUTS)
    document = json.loads(proc.stdout)
    assert document["schema"] == "shimkit.lint/v1"
    assert (
        proc.returncode
        == document["exit_code"]
        == EXIT_ERROR | EXIT_UNPREFIXED | EXIT_OTHER_VIOLATION
    )
    # input-error wording belongs to the ELF reader: the golden pins only its shape
    for error in document["input_errors"]:
        assert error["message"]
        error["message"] = "<message>"
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("SHIMKIT_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), (
        "lint JSON changed: if intended (and schema-compatible), rerun with SHIMKIT_UPDATE_GOLDEN=1"
    )


def _require(obj: dict, *keys: str) -> None:  # type: ignore[type-arg]
    for key in keys:
        assert key in obj, f"missing {key} in {sorted(obj)}"


def test_sarif_structure(lint) -> None:  # type: ignore[no-untyped-def]
    inputs = ["libimports_unprefixed.so", "needs_torch.wrapper.so", "missing.so"]
    proc = lint("--no-reference", "--format", "sarif", *inputs)
    log = json.loads(proc.stdout)
    _require(log, "$schema", "version", "runs")
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    _require(run, "tool", "results", "invocations")
    driver = run["tool"]["driver"]
    _require(driver, "name", "rules")
    rules = driver["rules"]
    for rule in rules:
        _require(rule, "id", "name", "shortDescription", "help", "defaultConfiguration")
        assert rule["help"]["text"].startswith("Fix:")
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    assert run["results"], "expected results"
    for result in run["results"]:
        _require(result, "ruleId", "ruleIndex", "level", "message", "locations")
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri in inputs and not uri.startswith("/")
    assert {r["ruleId"] for r in run["results"]} == {"SK001", "SK005"}
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "missing.so" in invocation["toolExecutionNotifications"][0]["message"]["text"]
    json_proc = lint("--no-reference", "--format", "json", *inputs)
    json_findings = sum(len(a["findings"]) for a in json.loads(json_proc.stdout)["artifacts"])
    assert len(run["results"]) == json_findings


def test_text_colour_only_when_asked(config) -> None:  # type: ignore[no-untyped-def]
    from shimkit.checks import LintContext, lint_set
    from shimkit.elf import ElfImage, Symbol
    from shimkit.report import render

    sym = Symbol("aoti_torch_x", None, "GLOBAL", "FUNC", False)
    img = ElfImage(
        "a.so", 64, True, "DYN", "EM_X86_64", [sym], [], [], None, False, 10, ".dynsym", 1
    )
    result = lint_set([img], LintContext(config=config))
    assert "\033[31m" in render(result, config, "text", color=True)
    assert "\033[" not in render(result, config, "text", color=False)


def test_pre_commit_hook_runs_shimkit_lint(repo_root: Path) -> None:
    text = (repo_root / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "- id: shimkit-lint" in text and "entry: shimkit lint" in text
    assert "language: python" in text


def test_sarif_paths_inside_the_root_are_relative(tmp_path: Path) -> None:
    from shimkit.report.sarif import _artifact_location

    outside = "/elsewhere/a b.so"
    assert _artifact_location(outside, tmp_path) == {"uri": "file:///elsewhere/a%20b.so"}
    inside = {"uri": "out/x.so", "uriBaseId": "%SRCROOT%"}
    assert _artifact_location(str(tmp_path / "out" / "x.so"), tmp_path) == inside
    assert _artifact_location("out/x.so", Path.cwd()) == inside


def test_sarif_container_member_is_a_logical_location() -> None:
    from shimkit.checks import Finding, Severity
    from shimkit.report.sarif import SarifOptions, _result

    finding = Finding(
        "SK001", "m.pt2!m/data/aotinductor/x.wrapper.so", "aoti_torch_x", "msg", Severity.ERROR
    )
    result = _result(finding, {"SK001": 0}, SarifOptions())
    loc = result["locations"][0]  # type: ignore[index]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "m.pt2"
    assert loc["physicalLocation"]["region"] == {"startLine": 1}
    assert [item["name"] for item in loc["logicalLocations"]] == [
        "m/data/aotinductor/x.wrapper.so",
        "aoti_torch_x",
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_and_erases() -> None:
    stream = _Tty()
    quiet = _Tty()
    short = ProgressBar(quiet)  # a scan shorter than the delay shows nothing
    short(1, 1)
    short.close()
    assert quiet.getvalue() == ""
    bar = ProgressBar(stream, min_interval=0.0, delay=0.0)
    bar(1, 4)
    bar(4, 4)
    bar.close()
    text = stream.getvalue()
    assert "1/4 files" in text and "4/4 files" in text and text.endswith("\r\033[2K")
    assert ProgressBar.for_tty(False) is None
