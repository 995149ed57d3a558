"""Running the rules: over one image (in-process API) or a set of artifacts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shimkit.checks.model import Finding, LintContext, Role, Severity
from shimkit.checks.roles import role_of
from shimkit.checks.rules import RULES, RULES_BY_ID
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
    suppressed: int = 0  # findings hidden by live suppressions
    expired: list[str] = field(default_factory=list)  # expired suppressions (exit bit 32)

    @property
    def findings(self) -> list[Finding]:
        return [f for a in self.artifacts for f in a.findings]

    def exit_code(self) -> int:
        code = EXIT_ERROR if self.problems else 0
        if self.expired:
            code |= EXIT_EXPIRED_SUPPRESSION
        for finding in self.findings:
            if finding.severity is Severity.ERROR:
                code |= RULES_BY_ID[finding.rule_id].exit_bit
        return code


def lint_set(
    images: Iterable[ElfImage | InputError | SkippedInput],
    context: LintContext,
    extra_providers: Iterable[str] = (),
) -> LintResult:
    """Lint artifacts together: the prefixed-import closure spans all of them.

    `context.providers` is replaced by `extra_providers` plus every prefixed
    shim-family name defined by an artifact of the set; when neither gives a
    prefixed name, the unresolved-prefixed-import rule is skipped (a note says
    so), since there is nothing to resolve against.
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
    providers = {n for n in extra_providers if config.is_prefixed_family(n)}
    for image in loaded:
        providers.update(s.name for s in image.exports if config.is_prefixed_family(s.name))
    explicit = context.providers
    if explicit is not None:
        providers.update(explicit)
    if providers:
        context.providers = frozenset(providers)
    else:
        context.providers = None
        result.notes.append(
            "SK004 skipped: no provider of prefixed shim symbols was given or linted"
        )
    if context.reference is None:
        result.notes.append("SK003 skipped: no reference library")
    for image in loaded:
        findings = lint_image(image, context)
        result.artifacts.append(
            ArtifactResult(image.location, role_of(image, context), image, findings)
        )
    result.artifacts.sort(key=lambda a: a.location)
    result.problems.sort(key=lambda p: p.location)
    return result
