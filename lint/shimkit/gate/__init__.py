"""The pre-merge gate: a baseline lock of shim-family symbols, plus suppressions."""

from shimkit.gate.baseline import (
    SCHEMA,
    ArtifactDrift,
    ArtifactState,
    diff,
    dump_baseline,
    load_baseline,
    relative_location,
    snapshot,
)
from shimkit.gate.suppressions import Suppression, apply_suppressions, load_suppressions

__all__ = [
    "SCHEMA",
    "ArtifactDrift",
    "ArtifactState",
    "Suppression",
    "apply_suppressions",
    "diff",
    "dump_baseline",
    "load_baseline",
    "load_suppressions",
    "relative_location",
    "snapshot",
]
