"""`shimkit gate --baseline FILE PATH...`: fail on new shim symbols or violations."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from shimkit.checks import Finding, LintResult
from shimkit.checks.rules import RULES_BY_ID
from shimkit.checks.run import run_lint
from shimkit.commands.lint_cmd import add_lint_options, lint_options, write_report
from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError
from shimkit.exitcodes import EXIT_BASELINE_DRIFT, EXIT_ERROR, EXIT_EXPIRED_SUPPRESSION
from shimkit.fileio import write_atomically
from shimkit.gate.baseline import (
    ArtifactState,
    diff,
    dump_baseline,
    load_baseline,
    relative_location,
    snapshot,
)
from shimkit.gate.outcome import GateOutcome
from shimkit.gate.suppressions import Applied, apply_suppressions, load_suppressions
from shimkit.report.gate import render_gate_json, render_gate_text

HELP = "compare shim symbols and violations with a baseline lock; fail on anything new"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lint_options(parser)
    parser.add_argument("--baseline", required=True, metavar="FILE", help="the lock file")
    parser.add_argument("--update", action="store_true", help="rewrite the baseline")
    parser.add_argument("--suppressions", metavar="FILE", help="TOML or JSON suppressions")
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="paths in the baseline are relative to DIR (default: the current directory)",
    )
    parser.add_argument(
        "--today",
        metavar="YYYY-MM-DD",
        type=_parse_date,
        help="the date suppressions expire against (default: today, UTC)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", metavar="FILE", help="write the report here")


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {text!r}") from None


def _empty_table_problems(result: LintResult) -> list[str]:
    """Images without the symbol table the gate relies on: never a pass."""
    messages = []
    for artifact in result.artifacts:
        image = artifact.image
        if not image.has_symbols:
            table = ".symtab" if image.e_type == "REL" else ".dynsym"
            messages.append(f"{artifact.location}: empty or missing {table}; cannot gate it")
    return messages


def _rel_findings(result: LintResult, root: Path) -> list[tuple[Finding, str]]:
    return [(f, relative_location(f.location, root)) for f in result.findings]


def evaluate(
    args: argparse.Namespace, config: ShimConfig
) -> tuple[GateOutcome, dict[str, ArtifactState]]:
    outcome = GateOutcome()
    root = Path(args.root) if args.root else Path.cwd()
    suppressions = load_suppressions(Path(args.suppressions)) if args.suppressions else []
    today = args.today or dt.datetime.now(dt.timezone.utc).date()
    options = lint_options(args, progress=True)
    try:
        result = run_lint(config, options)
    finally:
        if options.progress is not None:
            options.progress.close()
    outcome.artifacts = len(result.artifacts)
    outcome.skipped = [f"{s.location}: skipped: {s.reason}" for s in result.skipped]
    outcome.errors = [str(p) for p in result.problems] + _empty_table_problems(result)
    if outcome.errors:
        outcome.code |= EXIT_ERROR
    applied: Applied = apply_suppressions(_rel_findings(result, root), suppressions, today)
    outcome.expired = applied.expired
    outcome.suppressed = len(applied.suppressed)
    if applied.expired:
        outcome.code |= EXIT_EXPIRED_SUPPRESSION
    kept: dict[str, list[Finding]] = {}
    for finding in applied.kept:
        kept.setdefault(finding.location, []).append(finding)
    return outcome, snapshot(result.artifacts, kept, config, root)


def _compare(
    outcome: GateOutcome, current: dict[str, ArtifactState], baseline: Path, config: ShimConfig
) -> None:
    previous = load_baseline(baseline, config)
    outcome.drifts = diff(previous, current)
    for drift in outcome.drifts:
        if drift.fails:
            outcome.code |= EXIT_BASELINE_DRIFT
        for rule_id, _ in drift.added_violations:
            rule = RULES_BY_ID.get(rule_id)
            if rule is not None:
                outcome.code |= rule.exit_bit


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    baseline = Path(args.baseline)
    outcome, current = evaluate(args, config)
    if args.update:
        if outcome.code & EXIT_ERROR:
            outcome.errors.append(f"{baseline}: not written: fix the input errors first")
        else:
            write_atomically(baseline, dump_baseline(current, config))
            outcome.updated = str(baseline)
    else:
        try:
            _compare(outcome, current, baseline, config)
        except ShimkitError as exc:
            outcome.errors.append(str(exc))
            outcome.code |= EXIT_ERROR
    render = render_gate_json if args.format == "json" else render_gate_text
    text = render(outcome, str(baseline))
    write_report(text, args.output)
    if args.output and outcome.code:
        sys.stderr.write(f"shimkit gate: FAIL, exit {outcome.code} (report in {args.output})\n")
    return outcome.code
