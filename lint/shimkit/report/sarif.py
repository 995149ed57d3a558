"""`--format sarif`: a SARIF 2.1.0 log for code-scanning services.

One run; the driver lists every rule (ID, name, short and full description,
help text with the fix, default level). Each finding is a result whose
physical location is the artifact file (relative URIs resolve against
%SRCROOT%), and whose logical locations name the member inside a container
and the symbol. Input errors become tool execution notifications.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from urllib.parse import quote

from shimkit import __version__
from shimkit.checks import RULES, Finding, LintResult, Severity
from shimkit.config import ShimConfig
from shimkit.escape import lossless, printable

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/shimkit/shimkit/blob/main/docs/lint-rules.md"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}


def _uri(path: str) -> str:
    # Percent-encoding of the name's own bytes (surrogateescape): lossless for any name.
    posix = path.replace("\\", "/").encode("utf-8", "surrogateescape")
    return quote(posix, safe="/:@-._~")


def _artifact_location(path: str) -> dict[str, str]:
    """Relative paths resolve against %SRCROOT%; absolute ones become file:// URIs."""
    if path.startswith("/"):
        return {"uri": "file://" + _uri(path)}
    return {"uri": _uri(path), "uriBaseId": "%SRCROOT%"}


def _split(location: str) -> tuple[str, str | None]:
    """`outer.pt2!inner/x.so` -> ("outer.pt2", "inner/x.so")."""
    outer, sep, inner = location.partition("!")
    return outer, (inner if sep else None)


def _rule_descriptor(index: int) -> dict[str, object]:
    rule = RULES[index]
    anchor = f"{rule.id.lower()}-{rule.name}"
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": f"{rule.summary}. Fix: {rule.fix}"},
        "help": {
            "text": f"Fix: {rule.fix}",
            "markdown": f"**Fix:** {rule.fix}\n\nSee [{rule.id}]({INFORMATION_URI}#{anchor}).",
        },
        "helpUri": f"{INFORMATION_URI}#{anchor}",
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
    }


def _result(finding: Finding, rule_index: dict[str, int]) -> dict[str, object]:
    outer, inner = _split(finding.location)
    logical: list[dict[str, object]] = []
    where = lossless(finding.location)
    if inner is not None:
        logical.append({"name": lossless(inner), "fullyQualifiedName": where, "kind": "module"})
    if finding.symbol is not None:
        logical.append({"name": lossless(finding.symbol), "kind": "function"})
    location: dict[str, object] = {
        "physicalLocation": {"artifactLocation": _artifact_location(outer)}
    }
    if logical:
        location["logicalLocations"] = logical
    name = PurePosixPath(finding.location.replace("!", "/")).name
    return {
        "ruleId": finding.rule_id,
        "ruleIndex": rule_index[finding.rule_id],
        "level": _LEVELS[finding.severity],
        "message": {"text": printable(f"{name}: {finding.message}")},
        "locations": [location],
        "partialFingerprints": {
            "shimkitFinding/v1": f"{finding.rule_id}:{where}:{lossless(finding.symbol or '')}"
        },
    }


def sarif_dict(result: LintResult, config: ShimConfig) -> dict[str, object]:
    rule_index = {rule.id: i for i, rule in enumerate(RULES)}
    notifications = [
        {
            "level": "error",
            "message": {"text": printable(f"{p.location}: {p.message}")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_location(_split(p.location)[0])
                    }
                }
            ],
        }
        for p in result.problems
    ]
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "shimkit",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_descriptor(i) for i in range(len(RULES))],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not result.problems,
                "exitCode": result.exit_code(),
                "toolExecutionNotifications": notifications,
            }
        ],
        "results": [_result(f, rule_index) for f in result.findings],
        "properties": {"prefix": config.prefix, "families": list(config.families)},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render_sarif(result: LintResult, config: ShimConfig) -> str:
    # Names are escaped where they enter the log: `lossless` in names and fingerprints,
    # `printable` in message texts (escaping the whole log again would double the
    # backslashes of the messages' escapes).
    return json.dumps(sarif_dict(result, config), indent=2, sort_keys=True) + "\n"
