"""Rewrite a prebuilt blob (.so, or the blobs in a .pt2) to import prefixed shim names.

Rename UNDEFINED shim-family imports to their prefixed names, drop NEEDED
libtorch*/libc10*, clear PF_X on PT_GNU_STACK. Two engines: "lief" (default;
LIEF's builder, which re-lays out the file and adds ~60 KB) and "patch"
(`shimkit.aot.elfpatch`: append-only, moves no byte of the original, adds one
page). Only undefined symbols can be renamed safely (the GNU hash table covers
defined ones), so a blob that defines shim symbols is refused, as is one that
imports versioned shim symbols (the version binds them to one provider). The
result is re-read and checked with the linter's rules (`shimkit.checks.blob`)
before it is moved into place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shimkit.aot.elfpatch import PatchError, patch_blob
from shimkit.aot.pt2 import is_zip, rewrite_blobs
from shimkit.checks.blob import PREFIXED_BLOB_RULES, blob_findings, describe, read_blob_image
from shimkit.checks.rules import torch_library
from shimkit.config import ShimConfig
from shimkit.elf import ELF_MAGIC, ElfImage
from shimkit.errors import ShimkitError
from shimkit.fileio import check_output, staged_output


@dataclass
class BlobRewrite:
    """What one blob rewrite changed."""

    member: str | None  # the zip member for a .pt2, None for a bare .so
    renamed: list[str] = field(default_factory=list)
    dropped_needed: list[str] = field(default_factory=list)
    added_needed: list[str] = field(default_factory=list)
    cleared_exec_stack: bool = False
    image: ElfImage | None = None  # the rewritten blob, as the linter read it


def _import_lief():  # type: ignore[no-untyped-def]
    try:
        import lief
    except ImportError:
        raise ShimkitError(
            "lief is not installed; shimkit rewrite needs it: pip install 'lief>=0.16'"
        ) from None
    lief.logging.disable()
    return lief


LIBSTDCXX = "libstdc++.so.6"


def needs_libstdcxx(image: ElfImage) -> bool:
    """True if the blob imports C++ runtime symbols but does not NEED libstdc++ itself.

    Such a blob got them through libtorch's dependencies; once NEEDED libtorch
    is dropped, libstdc++ must be named directly.
    """
    if any(name.startswith("libstdc++") for name in image.needed):
        return False
    return any(
        s.name.startswith(("_Z", "__gxx_personality"))
        or (s.version or "").startswith(("GLIBCXX", "CXXABI"))
        for s in image.imports
    )


def _rewrite_with_lief(
    data: bytes, location: str, config: ShimConfig, add_needed: tuple[str, ...]
) -> tuple[bytes, BlobRewrite]:
    lief = _import_lief()
    binary = lief.ELF.parse(list(data))
    if binary is None:
        raise ShimkitError(f"{location}: LIEF cannot parse this ELF file")
    record = BlobRewrite(member=None)
    for symbol in binary.dynamic_symbols:
        # Undefined (SHN_UNDEF) = imported; LIEF's `imported` misses NOTYPE imports.
        if symbol.shndx == 0 and config.is_family(symbol.name):
            record.renamed.append(symbol.name)
            symbol.name = config.prefixed(symbol.name)
    for library in list(binary.libraries):
        if torch_library(str(library)):
            binary.remove_library(library)
            record.dropped_needed.append(str(library))
    for library in add_needed:
        binary.add_library(library)
        record.added_needed.append(library)
    for segment in binary.segments:
        if segment.type == lief.ELF.Segment.TYPE.GNU_STACK and segment.has(
            lief.ELF.Segment.FLAGS.X
        ):
            segment.flags = lief.ELF.Segment.FLAGS.R | lief.ELF.Segment.FLAGS.W
            record.cleared_exec_stack = True
    builder = lief.ELF.Builder(binary)
    builder.build()
    return bytes(builder.get_build()), record


ENGINES = ("lief", "patch")


def rewrite_blob_bytes(
    data: bytes, location: str, config: ShimConfig, engine: str = "lief"
) -> tuple[bytes, BlobRewrite]:
    """The rewritten image of the blob in `data`; refuses blobs it cannot rewrite safely.
    The result must be a prefixed blob by the linter's rules (PREFIXED_BLOB_RULES)."""
    before = read_blob_image(data, location)  # validates ELF-ness and structure first
    defined = [s.name for s in before.exports if config.is_family(s.name)]
    if defined:
        raise ShimkitError(
            f"{location}: defines shim symbol(s) {', '.join(defined[:3])}: it is a shim "
            "provider, not a blob; rename its sources with the rename header instead"
        )
    versioned = [
        f"{s.name}@{s.version}"
        for s in before.imports + before.exports
        if s.version and config.is_family(s.name)
    ]
    if versioned:
        raise ShimkitError(
            f"{location}: imports versioned shim symbol(s) {', '.join(versioned[:3])}: "
            "renaming would break the version binding; rebuild it with shimkit compile"
        )
    torch_cxx = [f.symbol for f in blob_findings(before, config, rules=("SK006",))]
    if torch_cxx:
        raise ShimkitError(
            f"{location}: imports libtorch C++ symbol(s) {', '.join(map(str, torch_cxx[:2]))}: "
            "it needs libtorch itself, renaming shims cannot free it; rebuild it with "
            "shimkit compile"
        )
    drops_libtorch = any(torch_library(n) for n in before.needed)
    add_needed = (LIBSTDCXX,) if drops_libtorch and needs_libstdcxx(before) else ()
    if engine == "lief":
        out, record = _rewrite_with_lief(data, location, config, add_needed)
    elif engine == "patch":
        try:
            patched = patch_blob(
                data,
                lambda name: config.prefixed(name) if config.is_family(name) else None,
                torch_library,
                add_needed=add_needed,
            )
        except PatchError as exc:
            raise ShimkitError(f"{location}: cannot patch: {exc} (use --engine lief)") from None
        out = patched.data
        record = BlobRewrite(
            member=None,
            renamed=patched.renamed,
            dropped_needed=patched.dropped_needed,
            added_needed=list(add_needed),
            cleared_exec_stack=patched.cleared_exec_stack,
        )
    else:
        raise ShimkitError(f"unknown rewrite engine {engine!r} (patch or lief)")
    rewritten = f"{location} (rewritten)"
    after = read_blob_image(out, rewritten)
    problems = blob_findings(after, config, rules=PREFIXED_BLOB_RULES)
    if problems:
        raise ShimkitError(f"{rewritten}: not a prefixed blob: {describe(problems)}")
    record.image = after
    return out, record


def rewrite_blob_file(
    source: Path, output: Path, config: ShimConfig, overwrite: bool = False, engine: str = "lief"
) -> list[BlobRewrite]:
    """Rewrite a .so or .pt2 at `source` into `output` (atomically; may equal source)."""
    if not source.is_file():
        raise ShimkitError(f"{source}: no such file")
    if output.resolve() != source.resolve():
        check_output(output, overwrite)
    records: list[BlobRewrite] = []
    if is_zip(source):

        def transform(member: str, data: bytes) -> bytes:
            rewritten, record = rewrite_blob_bytes(data, f"{source}:{member}", config, engine)
            record.member = member
            records.append(record)
            return rewritten

        with staged_output(output) as temp:
            rewrite_blobs(source, temp, transform)
        return records
    try:
        with source.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ShimkitError(f"{source}: cannot read: {exc.strerror}") from None
    if magic != ELF_MAGIC:
        raise ShimkitError(f"{source}: neither an ELF shared object nor a .pt2 zip")
    rewritten, record = rewrite_blob_bytes(source.read_bytes(), str(source), config, engine)
    with staged_output(output, mode=source.stat().st_mode & 0o7777) as temp:
        temp.write_bytes(rewritten)
    return [record]
