"""A whole lint run from paths: inputs, providers, reference, roles, rules.

Shared by `shimkit lint`, `shimkit gate` and the Bazel lint test runner, so
they all lint the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from shimkit.checks.engine import LintResult, lint_set
from shimkit.checks.model import LintContext
from shimkit.config import ShimConfig
from shimkit.elf.model import InputError
from shimkit.inputs.walk import SkippedInput

if TYPE_CHECKING:
    from shimkit.elf import ElfImage

Progress = Callable[..., None]


@dataclass
class LintOptions:
    """What the command line (or a Bazel rule) asks of a lint run.

    `references=None` means the default reference (torch's libraries, when
    torch is installed); an empty tuple means no collision check.
    """

    paths: Sequence[str]
    references: Sequence[str] | None = None
    providers: Sequence[str] = ()
    force_blob: bool = False
    own_patterns: Sequence[str] = ()
    use_cache: bool = True
    follow_symlinks: bool = True
    progress: Progress | None = None
    extra_notes: list[str] = field(default_factory=list)


def iter_inputs(
    paths: Sequence[str], *, follow_symlinks: bool = True, progress: Progress | None = None
) -> Iterator[ElfImage | InputError | SkippedInput]:
    """Every ELF image under `paths` (files, directories, archives, containers)."""
    from shimkit.inputs import iter_images

    if paths:
        yield from iter_images(list(paths), follow_symlinks=follow_symlinks, progress=progress)


def name_proxy_executor_ops(result: LintResult) -> None:
    """SK009 findings of blobs inside a .pt2 name the ops left to libtorch's proxy
    executor, from the node list AOTInductor packs beside each blob (the names compile
    gives too); a package without that list keeps the rule's own message."""
    from shimkit.checks.companions import proxy_executor_ops
    from shimkit.checks.rules import proxy_executor_message
    from shimkit.errors import ShimkitError

    listed: dict[str, dict[str, list[str]]] = {}
    for artifact in result.artifacts:
        for i, finding in enumerate(artifact.findings):
            container, sep, member = finding.location.partition("!")
            if finding.rule_id != "SK009" or not sep or not container.endswith(".pt2"):
                continue
            if container not in listed:
                try:
                    listed[container] = proxy_executor_ops(Path(container))
                except ShimkitError:
                    listed[container] = {}  # unreadable here: the rule's message stands
            ops = listed[container].get(member)
            if ops and finding.symbol:
                message = proxy_executor_message(finding.symbol, ops)
                artifact.findings[i] = replace(finding, message=message)


def run_lint(config: ShimConfig, options: LintOptions) -> LintResult:
    """Lint `options.paths` together (one provider closure) and return the result."""
    from shimkit.checks.reference import load_reference

    reference = (
        load_reference(None, use_cache=options.use_cache)
        if options.references is None
        else (
            load_reference(options.references, use_cache=options.use_cache)
            if options.references
            else None
        )
    )
    context = LintContext(
        config=config,
        force_blob=options.force_blob,
        own_patterns=tuple(options.own_patterns),
        reference=reference,
    )
    provider_errors: list[InputError] = []
    providers: dict[str, list[str]] = {}
    for item in iter_inputs(options.providers, follow_symlinks=options.follow_symlinks):
        if isinstance(item, InputError):
            provider_errors.append(InputError(item.location, f"provider: {item.message}"))
        elif not isinstance(item, SkippedInput):
            providers[item.location] = [s.name for s in item.exports]
    images = iter_inputs(
        options.paths, follow_symlinks=options.follow_symlinks, progress=options.progress
    )
    result = lint_set(images, context, providers=providers)
    name_proxy_executor_ops(result)
    result.problems.extend(provider_errors)
    if not result.artifacts and not result.problems:
        # an empty directory or a mistyped bazel-bin path must not pass silently
        where = " ".join(options.paths)
        result.problems.append(InputError(where, "no ELF artifacts found; nothing was linted"))
    result.problems.sort(key=lambda p: p.location)
    if reference is not None:
        result.notes.append("SK003 reference: " + ", ".join(reference.libraries))
    result.notes.extend(options.extra_notes)
    return result
