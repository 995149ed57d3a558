"""Suppressions: accepted findings, each with an owner, a reason and an expiry.

A TOML file (`[[suppression]]` tables) or a JSON file (a list, or an object
with a "suppressions" list). Fields: `rule` (ID or name), `symbol` (fnmatch
pattern), optional `artifact` (fnmatch pattern on the relative location,
default "*"), `owner`, `reason`, `expires` (YYYY-MM-DD). A suppression past
its expiry no longer applies and fails the gate (exit bit 32).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import tomllib

from shimkit.checks import Finding, resolve_rule
from shimkit.errors import ShimkitError
from shimkit.gate.baseline import parse_json

_REQUIRED = ("rule", "symbol", "owner", "reason", "expires")


@dataclass(frozen=True)
class Suppression:
    rule_id: str
    symbol: str
    artifact: str
    owner: str
    reason: str
    expires: dt.date
    index: int

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def matches(self, finding: Finding, location: str) -> bool:
        return (
            finding.rule_id == self.rule_id
            and fnmatch.fnmatchcase(finding.symbol or "", self.symbol)
            and fnmatch.fnmatchcase(location, self.artifact)
        )

    def describe(self) -> str:
        return (
            f"suppression #{self.index + 1} ({self.rule_id} {self.symbol}, "
            f"owner {self.owner}, expires {self.expires.isoformat()})"
        )


def _parse(path: Path, text: str) -> list[object]:
    if path.suffix == ".json":
        document: object = parse_json(path, text, "suppressions file")
    else:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ShimkitError(f"{path}: not valid TOML: {exc}") from None
        except RecursionError:
            raise ShimkitError(f"{path}: suppressions file is nested too deeply") from None
    if isinstance(document, dict):
        entries = document.get("suppression", document.get("suppressions", []))
    else:
        entries = document
    if not isinstance(entries, list):
        raise ShimkitError(f"{path}: suppressions must be a list of tables")
    return entries


def _date(value: object, where: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ShimkitError(f"{where}: 'expires' must be a date YYYY-MM-DD, got {value!r}")


def load_suppressions(path: Path) -> list[Suppression]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ShimkitError(f"{path}: cannot read suppressions: {exc}") from None
    result: list[Suppression] = []
    for index, entry in enumerate(_parse(path, text)):
        where = f"{path}: suppression #{index + 1}"
        if not isinstance(entry, dict):
            raise ShimkitError(f"{where}: must be a table")
        missing = [k for k in _REQUIRED if k not in entry]
        if missing:
            raise ShimkitError(f"{where}: missing {', '.join(missing)}")
        for key in ("rule", "symbol", "owner", "reason"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ShimkitError(f"{where}: '{key}' must be a non-empty string")
        artifact = entry.get("artifact", "*")
        if not isinstance(artifact, str) or not artifact:
            raise ShimkitError(f"{where}: 'artifact' must be a non-empty string")
        unknown = sorted(set(entry) - {*_REQUIRED, "artifact"})
        if unknown:
            raise ShimkitError(f"{where}: unknown field(s) {', '.join(unknown)}")
        rule = resolve_rule(entry["rule"])
        if rule is None:
            raise ShimkitError(f"{where}: unknown rule {entry['rule']!r}")
        result.append(
            Suppression(
                rule_id=rule.id,
                symbol=entry["symbol"],
                artifact=artifact,
                owner=entry["owner"],
                reason=entry["reason"],
                expires=_date(entry["expires"], where),
                index=index,
            )
        )
    return result


@dataclass
class Applied:
    kept: list[Finding]
    suppressed: list[tuple[Finding, Suppression]]
    expired: list[Suppression]


def apply_suppressions(
    findings: Iterable[tuple[Finding, str]],
    suppressions: list[Suppression],
    today: dt.date,
) -> Applied:
    """Split (finding, relative location) pairs by the live suppressions."""
    live = [s for s in suppressions if not s.expired(today)]
    applied = Applied([], [], [s for s in suppressions if s.expired(today)])
    for finding, location in findings:
        hit = next((s for s in live if s.matches(finding, location)), None)
        if hit is None:
            applied.kept.append(finding)
        else:
            applied.suppressed.append((finding, hit))
    return applied
