"""`--format json`: the `shimkit.lint/v1` schema (documented in docs/cli.md).

Compatible changes (new keys) keep the version; removing or changing the
meaning of a key bumps it. Output is deterministic: sorted artifacts, sorted
findings, sorted keys.
"""

from __future__ import annotations

import json

from shimkit import __version__
from shimkit.checks import RULES_BY_ID, Finding, LintResult, Severity
from shimkit.config import ShimConfig
from shimkit.escape import lossless_tree

SCHEMA = "shimkit.lint/v1"


def finding_dict(finding: Finding) -> dict[str, object]:
    return {
        "rule": finding.rule_id,
        "name": RULES_BY_ID[finding.rule_id].name,
        "severity": finding.severity.value,
        "symbol": finding.symbol,
        "message": finding.message,
    }


def lint_dict(result: LintResult, config: ShimConfig) -> dict[str, object]:
    findings = result.findings
    return {
        "schema": SCHEMA,
        "tool": {"name": "shimkit", "version": __version__},
        "config": {"prefix": config.prefix, "families": list(config.families)},
        "exit_code": result.exit_code(),
        "summary": {
            "artifacts": len(result.artifacts),
            "clean": sum(1 for a in result.artifacts if not a.findings),
            "errors": sum(1 for f in findings if f.severity is Severity.ERROR),
            "warnings": sum(1 for f in findings if f.severity is Severity.WARNING),
            "input_errors": len(result.problems),
        },
        "artifacts": [
            {
                "location": a.location,
                "role": a.role.value,
                "e_type": a.image.e_type,
                "elf_class": a.image.elf_class,
                "machine": a.image.machine,
                "findings": [finding_dict(f) for f in a.findings],
            }
            for a in result.artifacts
        ],
        "input_errors": [{"location": p.location, "message": p.message} for p in result.problems],
        "notes": list(result.notes),
        "skipped_rules": [{"rule": r, "reason": why} for r, why in result.skipped_rules],
        "skipped": [{"location": s.location, "reason": s.reason} for s in result.skipped],
        "suppressed": result.suppressed,
        "expired_suppressions": list(result.expired),
    }


def render_json(result: LintResult, config: ShimConfig) -> str:
    return json.dumps(lossless_tree(lint_dict(result, config)), indent=2, sort_keys=True) + "\n"
