"""What one `shimkit gate` run found (the report renders it: shimkit.report.gate)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shimkit.gate.baseline import ArtifactDrift
from shimkit.gate.suppressions import Suppression


@dataclass
class GateOutcome:
    code: int = 0  # the exit-code bits so far
    errors: list[str] = field(default_factory=list)
    expired: list[Suppression] = field(default_factory=list)
    suppressed: int = 0
    drifts: list[ArtifactDrift] = field(default_factory=list)
    artifacts: int = 0
    updated: str | None = None  # the baseline written by --update
    skipped: list[str] = field(default_factory=list)  # "path: skipped: reason", not linted
