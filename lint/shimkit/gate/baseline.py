"""The gate's baseline: a lock of each artifact's shim-family symbols and violations.

Schema `shimkit.baseline/v1` (docs/cli.md):

    {"schema": "shimkit.baseline/v1",
     "config": {"prefix": ..., "families": [...]},
     "artifacts": [{"path": "rel/path.so", "imports": [...], "exports": [...],
                    "violations": [{"rule": "SK001", "symbol": "..."}]}]}

`imports`/`exports` hold the dynamic names (no version suffix) of the shim
families, prefixed or not. Everything is sorted and paths are relative to the
gate's root, so `--update` output is byte-for-byte reproducible.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from shimkit.checks import ArtifactResult, Finding
from shimkit.config import ShimConfig
from shimkit.errors import ShimkitError
from shimkit.escape import lossless_tree, restore

SCHEMA = "shimkit.baseline/v1"

Violation = tuple[str, str]  # (rule ID, symbol or "")


@dataclass
class ArtifactState:
    path: str
    imports: set[str] = field(default_factory=set)
    exports: set[str] = field(default_factory=set)
    violations: set[Violation] = field(default_factory=set)

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "imports": sorted(self.imports),
            "exports": sorted(self.exports),
            "violations": [{"rule": r, "symbol": s} for r, s in sorted(self.violations)],
        }


# AOTInductor names a blob after a content hash ("c" + 51 base32 characters),
# which changes on every recompile; the baseline keeps a stable placeholder.
_AOTI_HASH_NAME = re.compile(r"(^|/)c[a-z0-9]{51}(?=(\.wrapper)?\.so$)")
HASH_PLACEHOLDER = "{hash}"


def relative_location(location: str, root: Path) -> str:
    """`location` with its outer file made relative to `root` (when under it), POSIX style.

    An AOTI blob's content-hash file name becomes `{hash}` (e.g.
    `model.pt2!model/data/aotinductor/model/{hash}.wrapper.so`), so recompiling
    a model does not look like one artifact gone and another new.
    """
    outer, sep, inner = location.partition("!")
    try:
        rel = Path(os.path.abspath(outer)).relative_to(Path(os.path.abspath(root)))
        outer = rel.as_posix()
    except ValueError:
        outer = Path(outer).as_posix()
    if sep:
        inner = _AOTI_HASH_NAME.sub(r"\1" + HASH_PLACEHOLDER, inner)
    else:
        outer = _AOTI_HASH_NAME.sub(r"\1" + HASH_PLACEHOLDER, outer)
    return outer + sep + inner


def _is_shim(name: str, config: ShimConfig) -> bool:
    return config.is_family(name) or config.is_prefixed_family(name)


def snapshot(
    artifacts: list[ArtifactResult],
    findings: dict[str, list[Finding]],
    config: ShimConfig,
    root: Path,
) -> dict[str, ArtifactState]:
    """The baseline state of `artifacts`, given each one's (unsuppressed) findings."""
    states: dict[str, ArtifactState] = {}
    for artifact in artifacts:
        path = relative_location(artifact.location, root)
        state = states.setdefault(path, ArtifactState(path))
        state.imports.update(s.name for s in artifact.image.imports if _is_shim(s.name, config))
        state.exports.update(s.name for s in artifact.image.exports if _is_shim(s.name, config))
        state.violations.update(
            (f.rule_id, f.symbol or "") for f in findings.get(artifact.location, [])
        )
    return states


def dump_baseline(states: dict[str, ArtifactState], config: ShimConfig) -> str:
    document = {
        "schema": SCHEMA,
        "config": {"prefix": config.prefix, "families": list(config.families)},
        "artifacts": [states[p].as_dict() for p in sorted(states)],
    }
    # Names that are not UTF-8 are written \xNN (`lossless`): the file is valid Unicode
    # JSON for any reader; load_baseline restores them.
    return json.dumps(lossless_tree(document), indent=2, sort_keys=True) + "\n"


def _str_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ShimkitError(f"{where} must be a list of strings")
    return value


def _names(entry: dict[str, object], key: str, where: str) -> set[str]:
    return {restore(name) for name in _str_list(entry.get(key, []), f"{where}.{key}")}


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(path: Path, text: str, what: str) -> object:
    """Strict JSON (no NaN/Infinity), any malformation as one ShimkitError line."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise ShimkitError(f"{path}: {what} is not valid JSON: {exc}") from None
    except ValueError as exc:
        raise ShimkitError(f"{path}: {what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ShimkitError(f"{path}: {what} is nested too deeply to be one of ours") from None


def load_baseline(path: Path, config: ShimConfig | None = None) -> dict[str, ArtifactState]:
    """Parse and validate a baseline file; every problem is one ShimkitError line.

    With `config`, a baseline written for another prefix is refused: its symbols would
    all read as drift (or, worse, match by accident).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ShimkitError(
            f"{path}: baseline does not exist; create it with `shimkit gate --update`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ShimkitError(f"{path}: cannot read baseline: {exc}") from None
    document = parse_json(path, text, "baseline")
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ShimkitError(f"{path}: not a {SCHEMA} baseline")
    recorded = document.get("config")
    prefix = recorded.get("prefix") if isinstance(recorded, dict) else None
    if config is not None and prefix != config.prefix:
        raise ShimkitError(
            f"{path}: baseline was written for prefix {prefix!r}, but {config.source} says "
            f"{config.prefix!r}; lint with the config the baseline was made with, or rewrite "
            "it with `shimkit gate --update`"
        )
    artifacts = document.get("artifacts")
    if not isinstance(artifacts, list):
        raise ShimkitError(f"{path}: 'artifacts' must be a list")
    states: dict[str, ArtifactState] = {}
    for index, entry in enumerate(artifacts):
        where = f"{path}: artifacts[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ShimkitError(f"{where} needs a string 'path'")
        state = ArtifactState(restore(entry["path"]))
        state.imports = _names(entry, "imports", where)
        state.exports = _names(entry, "exports", where)
        violations = entry.get("violations", [])
        if not isinstance(violations, list):
            raise ShimkitError(f"{where}.violations must be a list")
        for v in violations:
            if not (
                isinstance(v, dict)
                and isinstance(v.get("rule"), str)
                and isinstance(v.get("symbol"), str)
            ):
                raise ShimkitError(f"{where}.violations: each needs string 'rule' and 'symbol'")
            state.violations.add((v["rule"], restore(v["symbol"])))
        if state.path in states:
            raise ShimkitError(f"{where} repeats path {state.path!r}: each artifact appears once")
        states[state.path] = state
    return states


@dataclass
class ArtifactDrift:
    path: str
    status: str  # "changed" | "new" | "gone"
    added_imports: list[str] = field(default_factory=list)
    added_exports: list[str] = field(default_factory=list)
    added_violations: list[Violation] = field(default_factory=list)
    removed_imports: list[str] = field(default_factory=list)
    removed_exports: list[str] = field(default_factory=list)
    removed_violations: list[Violation] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        """New symbols, new violations and vanished artifacts fail; removals alone do not."""
        return bool(
            self.status == "gone"
            or self.added_imports
            or self.added_exports
            or self.added_violations
        )

    @property
    def changed(self) -> bool:
        return self.fails or bool(
            self.removed_imports or self.removed_exports or self.removed_violations
        )


def diff(old: dict[str, ArtifactState], new: dict[str, ArtifactState]) -> list[ArtifactDrift]:
    """What changed from `old` to `new`, per artifact, sorted by path."""
    drifts: list[ArtifactDrift] = []
    for path in sorted(set(old) | set(new)):
        before = old.get(path)
        after = new.get(path)
        if after is None:
            drifts.append(ArtifactDrift(path, "gone"))
            continue
        base = before or ArtifactState(path)
        drift = ArtifactDrift(
            path,
            "new" if before is None else "changed",
            added_imports=sorted(after.imports - base.imports),
            added_exports=sorted(after.exports - base.exports),
            added_violations=sorted(after.violations - base.violations),
            removed_imports=sorted(base.imports - after.imports),
            removed_exports=sorted(base.exports - after.exports),
            removed_violations=sorted(base.violations - after.violations),
        )
        if drift.changed or before is None:
            drifts.append(drift)
    return drifts
