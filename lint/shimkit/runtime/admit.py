"""What a blob must pass before the slim runtime loads it: readable, built for this host,
and clean by the linter's error rules with the runtime's shim library as the provider
(`shimkit.checks.blob`); a CUDA blob is not loaded on the CPU runtime. `shimkit.runtime.load`
(CPU and CUDA) and `shimkit probe` all call these."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from shimkit.checks.blob import blob_findings
from shimkit.checks.model import Severity
from shimkit.config import ShimConfig
from shimkit.elf import ElfFormatError, ElfImage, read_elf
from shimkit.errors import ShimkitError


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
            f"{location}: a {image.machine} {image.elf_class}-bit {endian}-endian blob cannot be "
            f"loaded on this {machine or 'unknown'} {bits}-bit {sys.byteorder}-endian host; "
            "probe it on a matching machine (shimkit lint reads it anywhere)"
        )
    return image


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
    `device`, "cpu" or "cuda"): a one-line ShimkitError naming the first error finding (and
    how many more), or saying the blob was built for CUDA when the CPU runtime is to load
    it; else nothing."""
    from shimkit.runtime.cuda import built_for_cuda

    try:
        image = read_loadable_image(data, where)
    except ShimkitError as exc:
        why = str(exc).removeprefix(f"{where}: ")
        raise ShimkitError(f"{where}: rejected by the linter: {why}") from None
    if device == "cpu" and built_for_cuda([s.name for s in image.imports]):
        raise ShimkitError(f"{where}: built for CUDA; load it with device='cuda'")
    errors = lint_errors(image, config, provider)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        first = errors[0].removeprefix(f"{where}: ")
        raise ShimkitError(f"{where}: rejected by the linter: {first}{more}")
