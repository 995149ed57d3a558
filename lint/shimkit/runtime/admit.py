"""What a blob must pass before the slim runtime loads it: readable, built for this host,
and clean by the linter's error rules with the runtime's shim library as the provider
(`shimkit.checks.blob`); a CUDA blob is not loaded on the CPU runtime. `shimkit.runtime.load`
(CPU and CUDA) and `shimkit probe` all call these."""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from pathlib import Path

from shimkit.checks.blob import blob_findings
from shimkit.checks.model import Severity
from shimkit.config import ShimConfig
from shimkit.elf import ElfFormatError, ElfImage, read_elf
from shimkit.errors import ShimkitError
from shimkit.runtime.blob import built_for_cuda


def _host_machine() -> tuple[str, int]:
    machine = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}.get(platform.machine(), "")
    return machine, 64 if sys.maxsize > 2**32 else 32


def read_loadable_image(data: bytes, location: str) -> ElfImage:
    """The blob's ELF image; one-line ShimkitError if it is unreadable or not for this host."""
    try:
        image = read_elf(data, location)
    except ElfFormatError as exc:
        raise ShimkitError(f"{location}: not a readable blob: {exc.message}") from None
    machine, bits = _host_machine()
    endian = "little" if image.little_endian else "big"
    if (image.machine, image.elf_class, image.little_endian) != (
        machine,
        bits,
        sys.byteorder == "little",
    ):
        raise ShimkitError(
            f"{location}: built for {image.machine} {image.elf_class}-bit {endian}-endian, so it "
            f"cannot be loaded on this {machine or 'unknown'} {bits}-bit {sys.byteorder}-endian "
            "host; load it on a matching machine (shimkit lint reads it anywhere)"
        )
    return image


def served_config(config: ShimConfig, prefix: str, runtime: Path) -> ShimConfig:
    """`config` with the prefix the runtime at `runtime` serves (its shimkit_runtime_prefix):
    a blob is judged against the libraries that will run it. A wheel's runtime serves
    shimkit's default prefix whichever prefix file the working directory has."""
    if prefix == config.prefix:
        return config
    return config.with_prefix(prefix, f"served by {runtime}")


def shim_prefixes(names: Iterable[str], families: tuple[str, ...]) -> dict[str, str]:
    """The prefixes that shim names among `names` carry, each with its first such name, in
    the order met (bare shim names are left out; empty if the known names are unavailable)."""
    from shimkit.checks.known_shims import known_shim_names, shim_prefix

    known = known_shim_names()
    found: dict[str, str] = {}
    if known is None:
        return found
    for name in names:
        prefix = shim_prefix(name, families, known)
        if prefix:
            found.setdefault(prefix, name)
    return found


def check_served_prefix(image: ElfImage, served: ShimConfig, location: str) -> None:
    """One line when the blob's shims carry another prefix than the runtime serves: which
    prefix it serves, and how to get a runtime for the blob's. (Unprefixed shims are the
    linter's SK001, reported by `lint_errors`.)"""
    found = shim_prefixes((s.name for s in image.imports), served.families)
    others = sorted(p for p in found if p != served.prefix)
    if not others:
        return
    other = others[0]
    raise ShimkitError(
        f"{location}: the blob imports shims under prefix {other} (e.g. {found[other]}), but "
        f"this runtime serves prefix {served.prefix}: {how_to_serve(other)}, or compile the "
        f"blob for {served.prefix}"
    )


def how_to_serve(prefix: str) -> str:
    """How an adopter gets slim libraries for `prefix` (a blob's, a prefix file's)."""
    return (
        f"build shims and a runtime for {prefix} from your shim_symbol_prefix.bzl "
        "(docs/adopting.md: CMake shimkit_shim_library, the Bazel macros, or `shimkit --config "
        "FILE run` in a shimkit checkout) and set $SHIMKIT_LIB_DIR to them"
    )


def lint_errors(image: ElfImage, config: ShimConfig, provider: Path) -> list[str]:
    """The linter's error findings for a blob about to be loaded next to the shim library
    `provider` (its exports close SK004), one line each."""
    try:
        exports = read_elf(provider.read_bytes(), str(provider)).exports
    except ElfFormatError as exc:
        raise ShimkitError(f"{provider}: the shim library is unreadable: {exc.message}") from None
    except OSError as exc:
        raise ShimkitError(f"{provider}: cannot read the shim library: {exc.strerror}") from None
    findings = blob_findings(image, config, providers=(s.name for s in exports))
    return [f"{f.rule_id}: {f.message}" for f in findings if f.severity is Severity.ERROR]


def refuse_unless_clean(
    data: bytes, where: str, config: ShimConfig, provider: Path, device: str
) -> None:
    """The linter on blob bytes about to be loaded against `provider` (the slim shims of
    `device`, "cpu" or "cuda", serving `config`'s prefix): a one-line ShimkitError saying
    the blob was built for CUDA when the CPU runtime is to load it, or for another prefix
    than the one served, or naming the first error finding (and how many more); else
    nothing."""
    try:
        image = read_loadable_image(data, where)
    except ShimkitError as exc:
        why = str(exc).removeprefix(f"{where}: ")
        raise ShimkitError(f"{where}: rejected by the linter: {why}") from None
    if device == "cpu" and built_for_cuda([s.name for s in image.imports]):
        raise ShimkitError(f"{where}: built for CUDA; load it with device='cuda'")
    check_served_prefix(image, config, where)
    errors = lint_errors(image, config, provider)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        first = errors[0].removeprefix(f"{where}: ")
        raise ShimkitError(f"{where}: rejected by the linter: {first}{more}")
