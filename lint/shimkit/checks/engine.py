"""Running the rules: over one image (in-process API) or a set of artifacts."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shimkit.checks.model import Finding, LintContext, Role, Severity
from shimkit.checks.roles import role_of
from shimkit.checks.rules import RULES, RULES_BY_ID
from shimkit.config import ShimConfig
from shimkit.elf.model import InputError
from shimkit.exitcodes import EXIT_ERROR, EXIT_EXPIRED_SUPPRESSION
from shimkit.inputs.walk import SkippedInput

if TYPE_CHECKING:
    from shimkit.elf import ElfImage


def lint_image(image: ElfImage, context: LintContext) -> list[Finding]:
    """Every finding of every rule that applies to `image`, sorted.

    This is the in-process API: a runtime can lint a blob before dlopen.
    """
    role = role_of(image, context)
    findings: list[Finding] = []
    for rule in RULES:
        if role in rule.roles:
            findings.extend(rule.check(image, context, role))
    findings.sort(key=Finding.sort_key)
    return findings


@dataclass
class ArtifactResult:
    location: str
    role: Role
    image: ElfImage
    findings: list[Finding]


@dataclass
class LintResult:
    """The outcome of a lint run over a set of artifacts."""

    artifacts: list[ArtifactResult] = field(default_factory=list)
    problems: list[InputError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[SkippedInput] = field(default_factory=list)  # met while walking, not read
    # Rules (or parts of rules) that did not run, and why: every report says so.
    skipped_rules: list[tuple[str, str]] = field(default_factory=list)
    suppressed: int = 0  # findings hidden by live suppressions
    expired: list[str] = field(default_factory=list)  # expired suppressions (exit bit 32)

    @property
    def findings(self) -> list[Finding]:
        return [f for a in self.artifacts for f in a.findings]

    def skip_rule(self, rule: str, reason: str) -> None:
        self.skipped_rules.append((rule, reason))
        self.notes.append(f"{rule} skipped: {reason}")

    def exit_code(self) -> int:
        code = EXIT_ERROR if self.problems else 0
        if self.expired:
            code |= EXIT_EXPIRED_SUPPRESSION
        for finding in self.findings:
            if finding.severity is Severity.ERROR:
                code |= RULES_BY_ID[finding.rule_id].exit_bit
        return code


def _owner_key(location: str) -> str:
    """One library reached by two paths (a symlink, --provider and a linted path) is one
    owner: plain files by their real path, container members by location."""
    return location if "!" in location else os.path.realpath(location)


def shim_owners(
    libraries: Mapping[str, Iterable[str]], config: ShimConfig
) -> dict[str, tuple[str, ...]]:
    """Prefixed shim names that more than one library defines -> those libraries."""
    by_name: dict[str, dict[str, str]] = {}
    for location, names in libraries.items():
        key = _owner_key(location)
        for name in names:
            if config.is_prefixed_family(name):
                by_name.setdefault(name, {}).setdefault(key, location)
    return {
        name: tuple(sorted(owners.values()))
        for name, owners in sorted(by_name.items())
        if len(owners) > 1
    }


def lint_set(
    images: Iterable[ElfImage | InputError | SkippedInput],
    context: LintContext,
    providers: Mapping[str, Iterable[str]] | None = None,
) -> LintResult:
    """Lint artifacts together: the prefixed-import closure and shim ownership span all
    of them.

    `providers` maps provider libraries that are not linted themselves to their
    exported names. `context.providers` is replaced by every prefixed shim-family
    name they or a linted artifact define; when none is, the
    unresolved-prefixed-import rule is skipped (a note says so), since there is
    nothing to resolve against. `context.owners` gets the prefixed names defined by
    more than one shared library of the run (single-owner rule).
    """
    result = LintResult()
    loaded: list[ElfImage] = []
    for item in images:
        if isinstance(item, InputError):
            result.problems.append(item)
        elif isinstance(item, SkippedInput):
            result.skipped.append(item)
        else:
            loaded.append(item)
    config = context.config
    libraries: dict[str, list[str]] = {
        location: list(names) for location, names in (providers or {}).items()
    }
    defined = {n for names in libraries.values() for n in names if config.is_prefixed_family(n)}
    for image in loaded:
        defined.update(s.name for s in image.exports if config.is_prefixed_family(s.name))
        if image.e_type == "DYN":  # objects and archives bind nothing at load time
            libraries[image.location] = [s.name for s in image.exports]
    explicit = context.providers
    if explicit is not None:
        defined.update(explicit)
    if defined:
        context.providers = frozenset(defined)
    else:
        context.providers = None
        result.skip_rule("SK004", "no provider of prefixed shim symbols was given or linted")
    context.owners = shim_owners(libraries, config)
    if context.reference is None:
        result.skip_rule("SK003", "no reference library (none found, or --no-reference)")
    if context.known_shims is None:
        result.skip_rule(
            "SK001/SK002 other-prefix check",
            "no shim name list (rename header) found, so shims under another prefix are "
            "not recognised",
        )
    for image in loaded:
        findings = lint_image(image, context)
        result.artifacts.append(
            ArtifactResult(image.location, role_of(image, context), image, findings)
        )
    result.artifacts.sort(key=lambda a: a.location)
    result.problems.sort(key=lambda p: p.location)
    return result
