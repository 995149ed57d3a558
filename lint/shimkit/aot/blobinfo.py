"""What a blob imports, exports and needs, read with pyelftools; and the prefixed-blob check.

This module reads only the few dynamic-linking facts the AOT helpers verify
after they write a blob. The full linter lives in `shimkit.elf`/`shimkit.checks`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from shimkit.config import ShimConfig
from shimkit.errors import ShimkitError

ELF_MAGIC = b"\x7fELF"
PT_GNU_STACK = "PT_GNU_STACK"
PF_X = 0x1
LIBTORCH_NEEDED_PREFIXES = ("libtorch", "libc10")


@dataclass(frozen=True)
class DynSymbol:
    name: str
    defined: bool
    version: str | None  # the symbol version name, None if unversioned


@dataclass
class BlobInfo:
    """The dynamic-linking facts of one ELF shared object."""

    location: str
    symbols: list[DynSymbol] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)
    exec_stack: bool = False

    @property
    def imports(self) -> list[str]:
        return sorted(s.name for s in self.symbols if not s.defined)

    @property
    def exports(self) -> list[str]:
        return sorted(s.name for s in self.symbols if s.defined)


def _versions(elf: object) -> list[str | None] | None:
    from elftools.elf.gnuversions import GNUVerSymSection

    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)  # type: ignore[attr-defined]
    if versym is None:
        return None
    names: dict[int, str] = {}
    for section in elf.iter_sections():  # type: ignore[attr-defined]
        if section["sh_type"] == "SHT_GNU_verneed":
            for _, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    names[aux["vna_other"]] = aux.name
        elif section["sh_type"] == "SHT_GNU_verdef":
            for verdef, auxiliaries in section.iter_versions():
                aux = next(iter(auxiliaries), None)
                if aux is not None and not verdef["vd_flags"] & 0x1:  # skip VER_FLG_BASE
                    names[verdef["vd_ndx"]] = aux.name
    result: list[str | None] = []
    for entry in versym.iter_symbols():
        index = entry["ndx"]
        if isinstance(index, str):  # VER_NDX_LOCAL / VER_NDX_GLOBAL
            result.append(None)
        else:
            result.append(names.get(index & 0x7FFF))
    return result


def _parse_with_linter(data: bytes, location: str) -> BlobInfo | None:
    """Read with the linter's reader (`shimkit.elf`); None if it is not available."""
    try:
        from shimkit.elf import ElfFormatError, read_elf
    except ImportError:
        return None
    try:
        image = read_elf(data, location)
    except ElfFormatError as exc:
        raise ShimkitError(f"{location}: truncated or malformed ELF file: {exc.message}") from None
    if image.e_type != "DYN":
        raise ShimkitError(f"{location}: not a shared object (e_type {image.e_type})")
    if image.symbol_table != ".dynsym":
        raise ShimkitError(f"{location}: has no .dynsym section")
    symbols = [DynSymbol(s.name, True, s.version) for s in image.exports]
    symbols += [DynSymbol(s.name, False, s.version) for s in image.imports]
    return BlobInfo(
        location=location,
        symbols=symbols,
        needed=list(image.needed),
        exec_stack=bool(image.exec_stack),
    )


def parse_blob_info(data: bytes, location: str, reader: str = "auto") -> BlobInfo:
    """Dynamic symbols, NEEDED entries and the exec-stack flag of an ELF image in `data`.

    `reader`: "linter" (shimkit.elf, the same reader the lint gate uses),
    "pyelftools", or "auto" (the linter's when installed, else pyelftools).
    """
    if not data.startswith(ELF_MAGIC):
        raise ShimkitError(f"{location}: not an ELF file (no \\x7fELF magic)")
    if reader in ("auto", "linter"):
        info = _parse_with_linter(data, location)
        if info is not None:
            return info
        if reader == "linter":
            raise ShimkitError("shimkit.elf (the linter's reader) is not installed")
    return _parse_with_pyelftools(data, location)


def _parse_with_pyelftools(data: bytes, location: str) -> BlobInfo:
    """The fallback reader, used when the linter's `shimkit.elf` is not installed."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    if not data.startswith(ELF_MAGIC):
        raise ShimkitError(f"{location}: not an ELF file (no \\x7fELF magic)")
    info = BlobInfo(location=location)
    try:
        elf = ELFFile(io.BytesIO(data))
        if elf["e_type"] != "ET_DYN":
            raise ShimkitError(f"{location}: not a shared object (e_type {elf['e_type']})")
        dynsym = elf.get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            raise ShimkitError(f"{location}: has no .dynsym section")
        versions = _versions(elf)
        for index, sym in enumerate(dynsym.iter_symbols()):
            if index == 0 or not sym.name:
                continue
            version = versions[index] if versions is not None and index < len(versions) else None
            info.symbols.append(DynSymbol(sym.name, sym["st_shndx"] != "SHN_UNDEF", version))
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                info.needed.extend(
                    tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"
                )
        for segment in elf.iter_segments():
            if segment["p_type"] == PT_GNU_STACK:
                info.exec_stack = bool(segment["p_flags"] & PF_X)
    except (ELFError, ValueError, KeyError, IndexError, AssertionError) as exc:
        raise ShimkitError(f"{location}: truncated or malformed ELF file: {exc}") from None
    return info


def read_blob_info(path: str | Path) -> BlobInfo:
    """Read a `.so` from disk (see `parse_blob_info`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_blob_info(data, str(path))


def prefixed_blob_problems(
    info: BlobInfo, config: ShimConfig, shim_names: frozenset[str] = frozenset()
) -> list[str]:
    """Why `info` is not a prefixed, libtorch-free blob; empty when it is.

    A symbol is unprefixed if it is in a shim family or in `shim_names` (the
    header's list also holds a few C names outside the families).
    """
    problems: list[str] = []
    unprefixed = sorted(
        {s.name for s in info.symbols if config.is_family(s.name) or s.name in shim_names}
    )
    if unprefixed:
        shown = ", ".join(unprefixed[:5]) + (" ..." if len(unprefixed) > 5 else "")
        problems.append(f"{len(unprefixed)} unprefixed shim symbol(s): {shown}")
    needed = [n for n in info.needed if n.startswith(LIBTORCH_NEEDED_PREFIXES)]
    if needed:
        problems.append(f"NEEDED {', '.join(needed)}")
    if info.exec_stack:
        problems.append("executable stack (PT_GNU_STACK has PF_X)")
    return problems


def unexpected_exports(info: BlobInfo, allowed_prefix: str = "AOTInductor") -> list[str]:
    """Exported names other than the blob's entry points."""
    return [name for name in info.exports if not name.startswith(allowed_prefix)]


def verify_prefixed_blob(
    info: BlobInfo, config: ShimConfig, shim_names: frozenset[str] = frozenset()
) -> None:
    """Raise a one-line ShimkitError if the blob is not prefixed and libtorch-free."""
    problems = prefixed_blob_problems(info, config, shim_names)
    if problems:
        raise ShimkitError(f"{info.location}: not a prefixed blob: {'; '.join(problems)}")
