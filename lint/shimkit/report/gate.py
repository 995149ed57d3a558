"""`shimkit gate` output: human text and the versioned JSON (`shimkit.gate/v1`, docs/cli.md)."""

from __future__ import annotations

import json

from shimkit.escape import lossless_tree, printable
from shimkit.exitcodes import EXIT_BASELINE_DRIFT
from shimkit.gate.baseline import ArtifactDrift
from shimkit.gate.outcome import GateOutcome

GATE_SCHEMA = "shimkit.gate/v1"


def _drift_lines(drift: ArtifactDrift) -> list[str]:
    if drift.status == "gone":
        return [f"  {drift.path}: gone (in the baseline, not found now)"]
    lines = [f"  {drift.path}" + (" (new artifact)" if drift.status == "new" else "")]
    for sign, imports, exports, violations in (
        ("+", drift.added_imports, drift.added_exports, drift.added_violations),
        ("-", drift.removed_imports, drift.removed_exports, drift.removed_violations),
    ):
        lines += [f"    {sign} import {name}" for name in imports]
        lines += [f"    {sign} export {name}" for name in exports]
        lines += [f"    {sign} violation {rule} {symbol}".rstrip() for rule, symbol in violations]
    return lines


def render_gate_text(outcome: GateOutcome, baseline: str) -> str:
    lines: list[str] = []
    for error in outcome.errors:
        lines.append(f"error {error}")
    for suppression in outcome.expired:
        lines.append(f"error {suppression.describe()} has expired: fix the finding or renew it")
    lines.extend(f"note {skipped}" for skipped in outcome.skipped)
    changed = [d for d in outcome.drifts if d.changed]
    if changed:
        lines.append(f"changes since {baseline}:")
        for drift in changed:
            lines.extend(_drift_lines(drift))
    if outcome.updated is not None:
        lines.append(f"shimkit gate: wrote {outcome.updated} ({outcome.artifacts} artifact(s))")
    elif outcome.code:
        hint = " (accept with --update)" if outcome.code & EXIT_BASELINE_DRIFT else ""
        lines.append(f"shimkit gate: FAIL, exit {outcome.code}{hint}")
    else:
        extra = f", {outcome.suppressed} suppressed" if outcome.suppressed else ""
        lines.append(f"shimkit gate: {outcome.artifacts} artifact(s) match {baseline}{extra}")
    return "\n".join(printable(line) for line in lines) + "\n"


def render_gate_json(outcome: GateOutcome, baseline: str) -> str:
    document = {
        "schema": GATE_SCHEMA,
        "baseline": baseline,
        "exit_code": outcome.code,
        "artifacts": outcome.artifacts,
        "updated": outcome.updated is not None,
        "errors": outcome.errors,
        "skipped": outcome.skipped,
        "suppressed": outcome.suppressed,
        "expired_suppressions": [
            {
                "index": s.index + 1,
                "rule": s.rule_id,
                "symbol": s.symbol,
                "owner": s.owner,
                "expires": s.expires.isoformat(),
            }
            for s in outcome.expired
        ],
        "drift": [
            {
                "path": d.path,
                "status": d.status,
                "fails": d.fails,
                "added": {
                    "imports": d.added_imports,
                    "exports": d.added_exports,
                    "violations": [{"rule": r, "symbol": s} for r, s in d.added_violations],
                },
                "removed": {
                    "imports": d.removed_imports,
                    "exports": d.removed_exports,
                    "violations": [{"rule": r, "symbol": s} for r, s in d.removed_violations],
                },
            }
            for d in outcome.drifts
            if d.changed
        ],
    }
    return json.dumps(lossless_tree(document), indent=2, sort_keys=True) + "\n"
