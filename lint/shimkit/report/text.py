"""Human-readable lint output: grouped by artifact, symbols listed, fix hints.

A clean run prints one summary line (nothing with --quiet); it names every
skipped rule and why. Colour is the caller's decision (a tty, no --no-color, no
$NO_COLOR).
"""

from __future__ import annotations

from collections import defaultdict

from shimkit.checks import RULES_BY_ID, Finding, LintResult, Severity
from shimkit.config import ShimConfig
from shimkit.escape import printable

MAX_LINES_PER_RULE = 50

_COLORS = {
    Severity.ERROR: "\033[31m",
    Severity.WARNING: "\033[33m",
    Severity.NOTE: "\033[36m",
}
_BOLD = "\033[1m"
_DIM = "\033[2m"
_RESET = "\033[0m"


class _Paint:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.enabled else text


def _summary(result: LintResult, config: ShimConfig) -> str:
    findings = result.findings
    errors = sum(1 for f in findings if f.severity is Severity.ERROR)
    warnings = sum(1 for f in findings if f.severity is Severity.WARNING)
    dirty = sum(1 for a in result.artifacts if a.findings)
    parts = [f"{len(result.artifacts)} artifact(s)"]
    if result.suppressed:
        parts.append(f"{result.suppressed} finding(s) suppressed")
    if dirty or result.problems or result.expired:
        parts.append(f"{dirty} with findings ({errors} error(s), {warnings} warning(s))")
        if result.problems:
            parts.append(f"{len(result.problems)} input error(s)")
        parts.append(f"exit {result.exit_code()}")
    else:
        parts.append(f"clean (prefix {config.prefix})")
        if warnings:
            parts.append(f"{warnings} warning(s)")
    if result.skipped_rules:
        skipped = "; ".join(f"{rule} ({reason})" for rule, reason in result.skipped_rules)
        parts.append(f"skipped: {skipped}")
    return "shimkit lint: " + ", ".join(parts)


def _artifact_block(location: str, role: str, findings: list[Finding], paint: _Paint) -> list[str]:
    lines = [f"{paint(printable(location), _BOLD)} ({role})"]
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_rule[finding.rule_id].append(finding)
    for rule_id in sorted(by_rule):
        rule = RULES_BY_ID[rule_id]
        group = by_rule[rule_id]
        label = paint(rule.severity.value, _COLORS[rule.severity])
        lines.append(f"  {label} {rule.id} {rule.name}: {rule.summary} [{len(group)}]")
        for finding in group[:MAX_LINES_PER_RULE]:
            lines.append(f"      {printable(finding.detail or finding.message)}")
        if len(group) > MAX_LINES_PER_RULE:
            more = len(group) - MAX_LINES_PER_RULE
            lines.append(f"      ... and {more} more (--format json lists all)")
        lines.append(paint(f"    fix: {rule.fix}", _DIM))
    return lines


def render_text(
    result: LintResult, config: ShimConfig, *, color: bool = False, quiet: bool = False
) -> str:
    paint = _Paint(color)
    lines: list[str] = []
    for artifact in result.artifacts:
        if artifact.findings:
            lines.extend(
                _artifact_block(artifact.location, artifact.role.value, artifact.findings, paint)
            )
    if result.problems:
        lines.append(paint("input errors:", _BOLD))
        for problem in result.problems:
            lines.append(f"  {paint('error', _COLORS[Severity.ERROR])} {printable(str(problem))}")
    for expired in result.expired:
        lines.append(f"{paint('error', _COLORS[Severity.ERROR])} {expired}")
    for skipped in result.skipped:
        note = paint("note", _COLORS[Severity.NOTE])
        lines.append(f"{note} {printable(skipped.location)}: skipped: {skipped.reason}")
    if quiet and not lines:
        return ""
    lines.append(_summary(result, config))
    return "\n".join(lines) + "\n"
