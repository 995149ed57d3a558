"""A prefixed blob, defined once, by the linter's rules.

`shimkit compile`, `shimkit rewrite`, `shimkit run`, `shimkit probe` and
`shimkit.runtime.load` check blobs with these functions, so "prefixed" means
the same to each of them as to `shimkit lint`:

- PREFIXED_BLOB_RULES: what makes a blob prefixed and libtorch-free: no
  unprefixed shim import or export (SK001, SK002), no NEEDED libtorch/libc10
  (SK005), no executable stack (SK007).
- Loadable by a runtime: every error rule with the runtime's shim library as the
  provider (SK004: each prefixed import defined; SK009: no proxy executor; ...):
  `shimkit.runtime.admit`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from shimkit.checks.engine import lint_image
from shimkit.checks.model import Finding, LintContext
from shimkit.checks.rules import RULES_BY_ID
from shimkit.config import ShimConfig
from shimkit.elf import ELF_MAGIC, ElfFormatError, ElfImage, read_elf
from shimkit.errors import ShimkitError

PREFIXED_BLOB_RULES = ("SK001", "SK002", "SK005", "SK007")


def read_blob_image(data: bytes, location: str) -> ElfImage:
    """The image of a blob: an ELF shared object with a .dynsym, else one ShimkitError line."""
    if not data.startswith(ELF_MAGIC):
        raise ShimkitError(f"{location}: not an ELF file (no \\x7fELF magic)")
    try:
        image = read_elf(data, location)
    except ElfFormatError as exc:
        raise ShimkitError(f"{location}: truncated or malformed ELF file: {exc.message}") from None
    if image.e_type != "DYN":
        raise ShimkitError(f"{location}: not a shared object (e_type {image.e_type})")
    if image.symbol_table != ".dynsym":
        raise ShimkitError(f"{location}: has no .dynsym section")
    return image


def blob_findings(
    image: ElfImage,
    config: ShimConfig,
    *,
    providers: Iterable[str] | None = None,
    rules: Collection[str] | None = None,
) -> list[Finding]:
    """The linter's findings for `image` as a blob, optionally only those of `rules`.

    `providers` are the names the runtime's shim library defines (the SK004
    closure); None skips SK004, as `shimkit lint` does without a provider.
    """
    context = LintContext(
        config=config,
        force_blob=True,
        providers=None if providers is None else frozenset(providers),
    )
    found = lint_image(image, context)
    return found if rules is None else [f for f in found if f.rule_id in rules]


def describe(findings: list[Finding], limit: int = 6) -> str:
    """Findings as one line: each rule's messages, then the fixes of the rules involved."""
    shown = "; ".join(f"{f.rule_id} {f.message}" for f in findings[:limit])
    if len(findings) > limit:
        shown += f"; ... and {len(findings) - limit} more (shimkit lint lists all)"
    fixes = dict.fromkeys(f"{f.rule_id}: {RULES_BY_ID[f.rule_id].fix}" for f in findings)
    return f"{shown} (fix: {'; '.join(fixes)})"
