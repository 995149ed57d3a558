"""`--format sarif`: a SARIF 2.1.0 log for code-scanning services.

One run; the driver lists every rule (ID, name, short and full description,
help text with the fix, default level, `helpUri` into this version's
docs/lint-rules.md, or under `--help-uri-base`). Each finding is a result whose
physical location is the artifact file with `region.startLine` 1 (a binary has
no lines; code scanning wants a region): relative to the source root (the
working directory, or `--source-root`) with `uriBaseId: %SRCROOT%` when inside
it, a `file://` URI otherwise. Logical locations name the member inside a
container and the symbol. `partialFingerprints` are the rule, the location
relative to the source root (an AOTI blob's content-hash name as `{hash}`) and the
symbol, so they stay the same across runs, checkouts and recompiles. Input errors
and skipped rules become tool execution notifications.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from shimkit import DOCS_URL, __version__
from shimkit.checks import RULES, Finding, LintResult, Severity
from shimkit.config import ShimConfig
from shimkit.escape import lossless, printable
from shimkit.gate.baseline import relative_location

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "shimkitFinding/v2"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_NO_LINE = {"startLine": 1}


@dataclass(frozen=True)
class SarifOptions:
    """Where relative URIs start (%SRCROOT%) and where rule help lives."""

    source_root: Path = field(default_factory=Path.cwd)
    docs_url: str = DOCS_URL

    def rules_page(self) -> str:
        return self.docs_url.rstrip("/") + "/lint-rules.md"


def _uri(path: str) -> str:
    # Percent-encoding of the name's own bytes (surrogateescape): lossless for any name.
    posix = path.replace("\\", "/").encode("utf-8", "surrogateescape")
    return quote(posix, safe="/:@-._~")


def _artifact_location(path: str, root: Path) -> dict[str, str]:
    """Inside `root`: relative to %SRCROOT%; elsewhere: a file:// URI."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(os.path.abspath(root))
    except ValueError:
        return {"uri": "file://" + _uri(absolute.as_posix())}
    return {"uri": _uri(relative.as_posix()), "uriBaseId": "%SRCROOT%"}


def _physical(path: str, root: Path) -> dict[str, object]:
    return {"artifactLocation": _artifact_location(path, root), "region": dict(_NO_LINE)}


def _split(location: str) -> tuple[str, str | None]:
    """`outer.pt2!inner/x.so` -> ("outer.pt2", "inner/x.so")."""
    outer, sep, inner = location.partition("!")
    return outer, (inner if sep else None)


def _rule_descriptor(index: int, options: SarifOptions) -> dict[str, object]:
    rule = RULES[index]
    help_uri = f"{options.rules_page()}#{rule.id.lower()}-{rule.name}"
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": f"{rule.summary}. Fix: {rule.fix}"},
        "help": {
            "text": f"Fix: {rule.fix}",
            "markdown": f"**Fix:** {rule.fix}\n\nSee [{rule.id}]({help_uri}).",
        },
        "helpUri": help_uri,
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
    }


def fingerprint(finding: Finding, root: Path) -> str:
    where = lossless(relative_location(finding.location, root))
    return f"{finding.rule_id}:{where}:{lossless(finding.symbol or '')}"


def _result(
    finding: Finding, rule_index: dict[str, int], options: SarifOptions
) -> dict[str, object]:
    outer, inner = _split(finding.location)
    logical: list[dict[str, object]] = []
    where = lossless(finding.location)
    if inner is not None:
        logical.append({"name": lossless(inner), "fullyQualifiedName": where, "kind": "module"})
    if finding.symbol is not None:
        logical.append({"name": lossless(finding.symbol), "kind": "function"})
    location: dict[str, object] = {"physicalLocation": _physical(outer, options.source_root)}
    if logical:
        location["logicalLocations"] = logical
    name = PurePosixPath(finding.location.replace("!", "/")).name
    return {
        "ruleId": finding.rule_id,
        "ruleIndex": rule_index[finding.rule_id],
        "level": _LEVELS[finding.severity],
        "message": {"text": printable(f"{name}: {finding.message}")},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT: fingerprint(finding, options.source_root)},
    }


def _notifications(
    result: LintResult, rule_index: dict[str, int], options: SarifOptions
) -> list[dict[str, object]]:
    notes: list[dict[str, object]] = [
        {
            "level": "error",
            "message": {"text": printable(f"{p.location}: {p.message}")},
            "locations": [
                {"physicalLocation": _physical(_split(p.location)[0], options.source_root)}
            ],
        }
        for p in result.problems
    ]
    for rule, reason in result.skipped_rules:
        note: dict[str, object] = {
            "level": "note",
            "message": {"text": f"{rule} skipped: {reason}"},
        }
        if rule in rule_index:
            note["associatedRule"] = {"id": rule, "index": rule_index[rule]}
        notes.append(note)
    return notes


def sarif_dict(
    result: LintResult, config: ShimConfig, options: SarifOptions | None = None
) -> dict[str, object]:
    options = options or SarifOptions()
    rule_index = {rule.id: i for i, rule in enumerate(RULES)}
    root_uri = "file://" + _uri(Path(os.path.abspath(options.source_root)).as_posix()) + "/"
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "shimkit",
                "version": __version__,
                "informationUri": options.rules_page(),
                "rules": [_rule_descriptor(i, options) for i in range(len(RULES))],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
        "invocations": [
            {
                "executionSuccessful": not result.problems,
                "exitCode": result.exit_code(),
                "toolExecutionNotifications": _notifications(result, rule_index, options),
            }
        ],
        "results": [_result(f, rule_index, options) for f in result.findings],
        "properties": {"prefix": config.prefix, "families": list(config.families)},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render_sarif(
    result: LintResult, config: ShimConfig, options: SarifOptions | None = None
) -> str:
    # Names are escaped where they enter the log: `lossless` in names and fingerprints,
    # `printable` in message texts (escaping the whole log again would double the
    # backslashes of the messages' escapes).
    document = sarif_dict(result, config, options)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
