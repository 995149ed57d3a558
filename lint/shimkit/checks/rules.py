"""The rules table: every check shimkit runs, with a stable ID.

Like Bitcoin Core's symbol-check.py, each rule is one small function over an
ELF image; the table below names it, gives its severity, its exit-code bit,
the roles it applies to, a one-line meaning and a fix hint. docs/lint-rules.md
is the catalogue; tests/lint/test_rules.py keeps the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from shimkit.checks.known_shims import shim_prefix
from shimkit.checks.model import Finding, LintContext, Role, Rule, Severity
from shimkit.exitcodes import EXIT_COLLISION, EXIT_OTHER_VIOLATION, EXIT_UNPREFIXED

if TYPE_CHECKING:
    from shimkit.elf import ElfImage

ALL_ROLES = frozenset(Role)
BLOB_ONLY = frozenset({Role.BLOB})
OWN_AND_BLOB = frozenset({Role.OWN, Role.BLOB})

# Libraries a blob must not depend on: they drag libtorch (and its copy of
# the shim ABI) into the process.
_TORCH_LIBRARY = re.compile(r"^(libtorch|libc10)[^/]*\.so(\..*)?$")

# Itanium-mangled names whose outermost nested name is the c10, at, torch or
# caffe2 namespace (functions, and their typeinfo/vtable/guard variables). The blob
# would need libtorch's C++ ABI to load.
_TORCH_CXX = re.compile(r"^_Z(?:T[VIST]|G[VR])?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)(?=\d|[CDI])")

# Exports every ELF shared object has, or that the toolchain makes weak in
# every C++ library (the std:: and __gnu_cxx vague-linkage template
# instantiations). They are not interposition hazards and not reported as
# collisions.
_COLLISION_IGNORED_NAMES = frozenset(
    {"_init", "_fini", "_edata", "_end", "__bss_start", "_DYNAMIC", "_GLOBAL_OFFSET_TABLE_"}
)
_COLLISION_IGNORED = re.compile(
    r"^_Z(?:T[VIST]|G[VR])?Z?(?:N[rVKRO]*)?(?:St|Sa|Sb|Ss|Si|So|Sd|9__gnu_cxx)"
)

# Entry points a blob must export so a runtime can create, run and free it.
# Any one name of a tuple is enough.
REQUIRED_ENTRY_POINTS: tuple[tuple[str, ...], ...] = (
    ("AOTInductorModelContainerCreateWithDevice", "AOTInductorModelContainerCreate"),
    ("AOTInductorModelContainerDelete",),
    ("AOTInductorModelContainerRun",),
)

PROXY_EXECUTOR_SHIM = "aoti_torch_proxy_executor_call_function"


def _foreign_prefix(name: str, context: LintContext) -> str | None:
    """The other prefix a shim-family name carries (not the configured one), or None:
    only a known shim name after the prefix counts, so unrelated names never match."""
    config = context.config
    known = context.known_shims
    if known is None or config.is_prefixed_family(name):
        return None
    if not any(map(name.__contains__, config.families)):
        return None  # most names of a blob: no family anywhere in them
    prefix = shim_prefix(name, config.families, known)
    return prefix or None


def _wrong_prefix_message(verb: str, name: str, other: str, context: LintContext) -> str:
    config = context.config
    bare = name[len(other) :]
    return (
        f"{verb} {name}, a shim under prefix {other}, not the configured {config.prefix} "
        f"({config.source}); expected {config.prefixed(bare)}"
    )


def _unprefixed_imports(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    rule = RULES_BY_ID["SK001"]
    for symbol in image.imports:
        weak = " (weak)" if symbol.binding == "WEAK" else ""
        if context.config.is_family(symbol.name):
            yield rule.finding(
                image,
                symbol.name,
                f"imports unprefixed shim symbol {symbol.name}{weak}; "
                f"expected {context.config.prefixed(symbol.name)}",
                f"{symbol.name}{weak}",
            )
        elif (other := _foreign_prefix(symbol.name, context)) is not None:
            yield rule.finding(
                image,
                symbol.name,
                _wrong_prefix_message("imports", symbol.name, other, context) + weak,
                f"{symbol.name}{weak}  [prefix {other}, configured {context.config.prefix}]",
            )


def _unprefixed_exports(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    rule = RULES_BY_ID["SK002"]
    for symbol in image.exports:
        if context.config.is_family(symbol.name):
            yield rule.finding(
                image,
                symbol.name,
                f"exports unprefixed shim symbol {symbol.name}; "
                f"expected {context.config.prefixed(symbol.name)}",
            )
        elif (other := _foreign_prefix(symbol.name, context)) is not None:
            yield rule.finding(
                image,
                symbol.name,
                _wrong_prefix_message("exports", symbol.name, other, context),
                f"{symbol.name}  [prefix {other}, configured {context.config.prefix}]",
            )


def collision_candidate(name: str) -> bool:
    """True if an export named `name` can interpose a reference library's."""
    return name not in _COLLISION_IGNORED_NAMES and not _COLLISION_IGNORED.match(name)


def _reference_collisions(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    reference = context.reference
    if reference is None:
        return
    rule = RULES_BY_ID["SK003"]
    candidates = [s.name for s in image.exports if collision_candidate(s.name)]
    for name in sorted(reference.intersection(candidates)):
        owners = ", ".join(reference.owners(name))
        yield rule.finding(
            image, name, f"exports {name}, which {owners} also exports", f"{name}  [{owners}]"
        )


def _unresolved_prefixed_imports(
    image: ElfImage, context: LintContext, role: Role
) -> Iterator[Finding]:
    providers = context.providers
    if providers is None:
        return
    rule = RULES_BY_ID["SK004"]
    for symbol in image.imports:
        name = symbol.name
        if context.config.is_prefixed_family(name) and name not in providers:
            if symbol.binding == "WEAK":
                continue  # a weak import may stay unresolved by design
            yield rule.finding(image, name, f"imports {name}, which no provider library defines")


def torch_library(needed: str) -> bool:
    """True for a library name that drags libtorch in (libtorch*.so*, libc10*.so*)."""
    return bool(_TORCH_LIBRARY.match(needed))


def _needs_libtorch(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    rule = RULES_BY_ID["SK005"]
    for needed in image.needed:
        if torch_library(needed):
            yield rule.finding(image, needed, f"has NEEDED {needed}", f"NEEDED {needed}")


def torch_cxx_symbol(name: str) -> bool:
    """True for a mangled C++ name in the c10, at or torch namespaces."""
    return bool(_TORCH_CXX.match(name))


def _imports_torch_cxx(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    rule = RULES_BY_ID["SK006"]
    for symbol in image.imports:
        if torch_cxx_symbol(symbol.name):
            yield rule.finding(image, symbol.name, f"imports libtorch C++ symbol {symbol.name}")


def _exec_stack(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    if image.exec_stack:
        yield RULES_BY_ID["SK007"].finding(
            image, None, "requests an executable stack", "PT_GNU_STACK is RWE (or missing)"
        )


def _missing_entry_points(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    if image.e_type == "REL":
        return  # an object file is not a loadable blob yet
    exported = {s.name for s in image.exports}
    rule = RULES_BY_ID["SK008"]
    for alternatives in REQUIRED_ENTRY_POINTS:
        if not exported.intersection(alternatives):
            wanted = " or ".join(alternatives)
            yield rule.finding(image, alternatives[0], f"does not export {wanted}", wanted)


def proxy_executor_message(symbol: str, ops: Sequence[str] = ()) -> str:
    """SK009's message; `ops` names the ops where the package lists them (the node list
    AOTInductor packs beside the blob: `shimkit.checks.companions.proxy_executor_ops`)."""
    if not ops:
        return f"imports {symbol}: an op has no C shim and needs libtorch's proxy executor"
    return (
        f"imports {symbol}: {len(ops)} op(s) have no C shim and need libtorch's proxy "
        f"executor: {', '.join(ops)}"
    )


def _needs_proxy_executor(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    rule = RULES_BY_ID["SK009"]
    prefixed = context.config.prefixed(PROXY_EXECUTOR_SHIM)
    for symbol in image.imports:
        if symbol.name in (PROXY_EXECUTOR_SHIM, prefixed):
            yield rule.finding(image, symbol.name, proxy_executor_message(symbol.name))


_ELF_HOUSEKEEPING = frozenset({"_init", "_fini", "_edata", "_end", "__bss_start"})


def _extra_blob_exports(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    extra = sorted(
        {
            s.name
            for s in image.exports
            if not s.name.startswith("AOTInductor") and s.name not in _ELF_HOUSEKEEPING
        }
    )
    if extra:
        sample = ", ".join(extra[:3]) + (", ..." if len(extra) > 3 else "")
        yield RULES_BY_ID["SK010"].finding(
            image,
            None,
            f"exports {len(extra)} symbol(s) besides the AOTInductor* entry points: {sample}",
            f"{len(extra)} extra export(s): {sample}",
        )


def _several_owners(image: ElfImage, context: LintContext, role: Role) -> Iterator[Finding]:
    owners = context.owners
    if not owners or image.e_type != "DYN":
        return
    rule = RULES_BY_ID["SK011"]
    for symbol in image.exports:
        libraries = owners.get(symbol.name)
        if libraries is not None:
            listed = ", ".join(libraries)
            yield rule.finding(
                image,
                symbol.name,
                f"defines {symbol.name}, which {len(libraries)} libraries define: {listed}",
                f"{symbol.name}  [{listed}]",
            )


RULES: tuple[Rule, ...] = (
    Rule(
        id="SK001",
        name="unprefixed-shim-import",
        severity=Severity.ERROR,
        exit_bit=EXIT_UNPREFIXED,
        roles=ALL_ROLES,
        summary="imports a shim-family symbol without the configured prefix: unprefixed, or "
        "under another prefix (weak imports included)",
        fix="recompile the blob with `shimkit compile` (or rename a built one with "
        "`shimkit rewrite`); C/C++ code: build with SHIM_PREFIX_DEFINES and the generated "
        "rename header; another prefix: rebuild for the configured prefix file, or lint with "
        "the prefix file it was built for",
        check=_unprefixed_imports,
    ),
    Rule(
        id="SK002",
        name="unprefixed-shim-export",
        severity=Severity.ERROR,
        exit_bit=EXIT_UNPREFIXED,
        roles=OWN_AND_BLOB,
        summary="one of our libraries exports a shim-family symbol without the configured "
        "prefix: unprefixed, or under another prefix",
        fix="build the shim library with the prefix define (SHIM_PREFIX_DEFINES) of the "
        "configured prefix file so every shim is defined under its prefixed name",
        check=_unprefixed_exports,
    ),
    Rule(
        id="SK003",
        name="reference-collision",
        severity=Severity.ERROR,
        exit_bit=EXIT_COLLISION,
        roles=OWN_AND_BLOB,
        summary="exports a symbol that a reference library (libtorch) also exports",
        fix="prefix or hide the symbol (-fvisibility=hidden, a version script with local: *)",
        check=_reference_collisions,
    ),
    Rule(
        id="SK004",
        name="unresolved-prefixed-import",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=ALL_ROLES,
        summary="imports a prefixed shim symbol that no provider library defines",
        fix="implement the shim in the shim library, or pass the library that defines it "
        "with --provider",
        check=_unresolved_prefixed_imports,
    ),
    Rule(
        id="SK005",
        name="blob-needs-libtorch",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=BLOB_ONLY,
        summary="a blob has NEEDED libtorch*/libc10*",
        fix="compile with inductor_configs={'aot_inductor.link_libtorch': False}, or drop the "
        "entry with `patchelf --remove-needed`",
        check=_needs_libtorch,
    ),
    Rule(
        id="SK006",
        name="blob-imports-torch-cxx",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=BLOB_ONLY,
        summary="a blob imports C++ symbols of the c10, at, torch or caffe2 namespaces",
        fix="export the model with ops that have C shims only; blobs must use the C shim ABI",
        check=_imports_torch_cxx,
    ),
    Rule(
        id="SK007",
        name="executable-stack",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=ALL_ROLES,
        summary="requests an executable stack (glibc 2.41+ refuses to dlopen it)",
        fix="link with -Wl,-z,noexecstack (or `patchelf --clear-execstack`, patchelf >= 0.18)",
        check=_exec_stack,
    ),
    Rule(
        id="SK008",
        name="blob-missing-entry-points",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=BLOB_ONLY,
        summary="a blob lacks AOTInductorModelContainer* entry points (Create, Delete, Run)",
        fix="keep AOTInductor* exported (version script `global: AOTInductor*;`)",
        check=_missing_entry_points,
    ),
    Rule(
        id="SK009",
        name="blob-needs-proxy-executor",
        severity=Severity.ERROR,
        exit_bit=EXIT_OTHER_VIOLATION,
        roles=BLOB_ONLY,
        summary="a blob calls the proxy executor: an op has no C shim (slim runtimes lack it)",
        fix="replace the op with one that has a C shim, or run the model under libtorch",
        check=_needs_proxy_executor,
    ),
    Rule(
        id="SK010",
        name="blob-exports-extra-symbols",
        severity=Severity.WARNING,
        exit_bit=0,
        roles=BLOB_ONLY,
        summary="a blob exports symbols besides its AOTInductor* entry points",
        fix="compile with -fvisibility=hidden and a version script "
        "`{ global: AOTInductor*; local: *; };`",
        check=_extra_blob_exports,
    ),
    Rule(
        id="SK011",
        name="shim-defined-twice",
        severity=Severity.ERROR,
        exit_bit=EXIT_COLLISION,
        roles=ALL_ROLES,
        summary="a prefixed shim is defined by more than one library of the run (it binds by "
        "load order)",
        fix="keep each prefixed shim in exactly one library (one shim library per process), "
        "or hide the duplicate (-fvisibility=hidden, a version script)",
        check=_several_owners,
    ),
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


def resolve_rule(key: str) -> Rule | None:
    """A rule by ID (`SK001`) or name (`unprefixed-shim-import`)."""
    return RULES_BY_ID.get(key.upper()) or RULES_BY_NAME.get(key)
