"""The data model of linting: severities, roles, rules, findings and the lint context."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from shimkit.config import ShimConfig

if TYPE_CHECKING:  # the ELF model is only needed for annotations here
    from shimkit.elf import ElfImage


def _shipped_shim_names() -> frozenset[str] | None:
    from shimkit.checks.known_shims import known_shim_names

    return known_shim_names()


class Severity(str, enum.Enum):
    """How bad a finding is. Only errors set exit-code bits."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Role(str, enum.Enum):
    """What an artifact is, which decides the rules that apply to it."""

    BLOB = "blob"  # an AOTInductor delegate blob (*.wrapper.so, in a .pt2, ...)
    OWN = "own"  # one of the project's own libraries (shim, runtime)
    OTHER = "other"  # a third-party file linted along (only import-side rules)


@dataclass(frozen=True)
class Finding:
    """One violation: a rule broken by one artifact, usually about one symbol."""

    rule_id: str
    location: str
    symbol: str | None
    message: str
    severity: Severity
    detail: str = ""  # the short form listed under its rule in text output

    def sort_key(self) -> tuple[str, str, str]:
        return (self.location, self.rule_id, self.symbol or "")


@dataclass
class LintContext:
    """Everything a rule may look at besides the image itself.

    `providers` is the set of names defined by the provider libraries plus
    every artifact linted in the same run (the closure); `None` means no
    provider is known and the unresolved-prefixed-import rule is skipped.
    `reference` maps an exported name to the reference library exporting it;
    `None` means no reference library was given and collisions are skipped.
    `known_shims` is the list of shim names (the rename header's) that tells a
    shim under another prefix from an unrelated name; `None` means no list was
    found and only unprefixed shim names are reported. `owners` maps a prefixed
    shim name defined by more than one library of the run to those libraries
    (set by `lint_set`).
    """

    config: ShimConfig
    force_blob: bool = False
    own_patterns: tuple[str, ...] = ()
    providers: frozenset[str] | None = None
    reference: Reference | None = None
    role_cache: dict[str, Role] = field(default_factory=dict)
    known_shims: frozenset[str] | None = field(default_factory=_shipped_shim_names)
    owners: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Reference(Protocol):
    """Export names of reference libraries (e.g. libtorch), for collisions."""

    @property
    def libraries(self) -> tuple[str, ...]: ...

    def intersection(self, names: Iterable[str]) -> set[str]:
        """The subset of `names` some reference library exports."""
        ...

    def owners(self, name: str) -> list[str]:
        """The reference libraries exporting `name` (sorted)."""
        ...


class NameSetReference:
    """A Reference over plain name sets (tests, in-process callers)."""

    def __init__(self, sources: dict[str, frozenset[str]]) -> None:
        self._sources = dict(sources)

    @property
    def libraries(self) -> tuple[str, ...]:
        return tuple(sorted(self._sources))

    def owners(self, name: str) -> list[str]:
        return sorted(lib for lib, names in self._sources.items() if name in names)

    def intersection(self, names: Iterable[str]) -> set[str]:
        wanted = set(names)
        found: set[str] = set()
        for exported in self._sources.values():
            found |= exported.intersection(wanted)
        return found


CheckFn = Callable[["ElfImage", LintContext, Role], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named check. IDs are stable forever; names are kebab-case."""

    id: str
    name: str
    severity: Severity
    exit_bit: int
    roles: frozenset[Role]
    summary: str
    fix: str
    check: CheckFn = field(repr=False, compare=False)

    def finding(
        self,
        image: ElfImage,
        symbol: str | None,
        message: str | None = None,
        detail: str | None = None,
    ) -> Finding:
        return Finding(
            rule_id=self.id,
            location=image.location,
            symbol=symbol,
            message=message or self.summary,
            severity=self.severity,
            detail=detail if detail is not None else (symbol or ""),
        )
