"""Lint rules over ELF images: the rules table, roles and the engine.

In-process use (e.g. a runtime linting a blob before dlopen):

    from shimkit.checks import LintContext, lint_image
    findings = lint_image(image, LintContext(config=load_config()))
"""

from shimkit.checks.engine import (
    ArtifactResult,
    LintResult,
    lint_image,
    lint_set,
)
from shimkit.checks.model import (
    Finding,
    LintContext,
    NameSetReference,
    Reference,
    Role,
    Rule,
    Severity,
)
from shimkit.checks.roles import role_of
from shimkit.checks.rules import RULES, RULES_BY_ID, resolve_rule

__all__ = [
    "RULES",
    "RULES_BY_ID",
    "ArtifactResult",
    "Finding",
    "LintContext",
    "LintResult",
    "NameSetReference",
    "Reference",
    "Role",
    "Rule",
    "Severity",
    "lint_image",
    "lint_set",
    "resolve_rule",
    "role_of",
]
