"""Rewrite a prebuilt blob (.so, or the blobs in a .pt2) to import prefixed shim names.

Rename UNDEFINED shim-family imports (and the few other C shim names in the
header's list) to their prefixed names, drop NEEDED libtorch*/libc10*, clear
PF_X on PT_GNU_STACK. Two engines: "lief" (default; LIEF's builder, which
re-lays out the file and adds ~60 KB) and "patch" (`shimkit.aot.elfpatch`:
append-only, moves no byte of the original, adds one page).
Only undefined symbols can be renamed safely (the GNU hash table covers
defined ones), so a blob that defines shim symbols is refused, as is one that
imports versioned shim symbols (the version binds them to one provider). The result is re-read and
verified before it is moved into place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shimkit.aot.blobinfo import (
    ELF_MAGIC,
    LIBTORCH_NEEDED_PREFIXES,
    BlobInfo,
    parse_blob_info,
    verify_prefixed_blob,
)
from shimkit.aot.elfpatch import PatchError, patch_blob
from shimkit.aot.pt2 import is_zip, rewrite_blobs
from shimkit.config import ShimConfig
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
    info: BlobInfo | None = None


def _import_lief():  # type: ignore[no-untyped-def]
    try:
        import lief
    except ImportError:
        raise ShimkitError(
            "lief is not installed; shimkit rewrite needs it: pip install 'lief>=0.16'"
        ) from None
    lief.logging.disable()
    return lief


def _needs_rename(name: str, config: ShimConfig, names: frozenset[str]) -> bool:
    return config.is_family(name) or (name in names and not name.startswith(config.prefix))


LIBSTDCXX = "libstdc++.so.6"
# Mangled C++ names in libtorch's namespaces (c10::, at::, torch::), not the C shims.
TORCH_CXX_PREFIXES = ("_ZN3c10", "_ZNK3c10", "_ZN2at", "_ZNK2at", "_ZN5torch", "_ZNK5torch")


def needs_libstdcxx(info: BlobInfo) -> bool:
    """True if the blob imports C++ runtime symbols but does not NEED libstdc++ itself.

    Such a blob got them through libtorch's dependencies; once NEEDED libtorch
    is dropped, libstdc++ must be named directly.
    """
    if any(name.startswith("libstdc++") for name in info.needed):
        return False
    return any(
        not s.defined
        and (
            s.name.startswith(("_Z", "__gxx_personality"))
            or (s.version or "").startswith(("GLIBCXX", "CXXABI"))
        )
        for s in info.symbols
    )


def _rewrite_with_lief(
    data: bytes,
    location: str,
    config: ShimConfig,
    names: frozenset[str],
    add_needed: tuple[str, ...],
) -> tuple[bytes, BlobRewrite]:
    lief = _import_lief()
    binary = lief.ELF.parse(list(data))
    if binary is None:
        raise ShimkitError(f"{location}: LIEF cannot parse this ELF file")
    record = BlobRewrite(member=None)
    for symbol in binary.dynamic_symbols:
        # Undefined (SHN_UNDEF) = imported; LIEF's `imported` misses NOTYPE imports.
        if symbol.shndx == 0 and _needs_rename(symbol.name, config, names):
            record.renamed.append(symbol.name)
            symbol.name = config.prefixed(symbol.name)
    for library in list(binary.libraries):
        if str(library).startswith(LIBTORCH_NEEDED_PREFIXES):
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
    data: bytes,
    location: str,
    config: ShimConfig,
    names: frozenset[str] = frozenset(),
    engine: str = "lief",
) -> tuple[bytes, BlobRewrite]:
    """The rewritten image of the blob in `data`; refuses blobs it cannot rewrite safely."""
    before = parse_blob_info(data, location)  # validates ELF-ness and structure first
    defined = sorted(
        s.name for s in before.symbols if s.defined and _needs_rename(s.name, config, names)
    )
    if defined:
        raise ShimkitError(
            f"{location}: defines shim symbol(s) {', '.join(defined[:3])}: it is a shim "
            "provider, not a blob; rename its sources with the rename header instead"
        )
    versioned = sorted(
        f"{s.name}@{s.version}"
        for s in before.symbols
        if s.version and _needs_rename(s.name, config, names)
    )
    if versioned:
        raise ShimkitError(
            f"{location}: imports versioned shim symbol(s) {', '.join(versioned[:3])}: "
            "renaming would break the version binding; rebuild it with shimkit compile"
        )
    torch_cxx = sorted(
        s.name for s in before.symbols if not s.defined and s.name.startswith(TORCH_CXX_PREFIXES)
    )
    if torch_cxx:
        raise ShimkitError(
            f"{location}: imports libtorch C++ symbol(s) {', '.join(torch_cxx[:2])}: it needs "
            "libtorch itself, renaming shims cannot free it; rebuild it with shimkit compile"
        )
    drops_libtorch = any(n.startswith(LIBTORCH_NEEDED_PREFIXES) for n in before.needed)
    add_needed = (LIBSTDCXX,) if drops_libtorch and needs_libstdcxx(before) else ()
    if engine == "lief":
        out, record = _rewrite_with_lief(data, location, config, names, add_needed)
    elif engine == "patch":
        try:
            patched = patch_blob(
                data,
                lambda name: config.prefixed(name) if _needs_rename(name, config, names) else None,
                lambda library: library.startswith(LIBTORCH_NEEDED_PREFIXES),
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
    after = parse_blob_info(out, f"{location} (rewritten)")
    verify_prefixed_blob(after, config, names)
    record.info = after
    return out, record


def rewrite_blob_file(
    source: Path,
    output: Path,
    config: ShimConfig,
    names: frozenset[str] = frozenset(),
    overwrite: bool = False,
    engine: str = "lief",
) -> list[BlobRewrite]:
    """Rewrite a .so or .pt2 at `source` into `output` (atomically; may equal source)."""
    if not source.is_file():
        raise ShimkitError(f"{source}: no such file")
    if output.resolve() != source.resolve():
        check_output(output, overwrite)
    records: list[BlobRewrite] = []
    if is_zip(source):

        def transform(member: str, data: bytes) -> bytes:
            rewritten, record = rewrite_blob_bytes(
                data, f"{source}:{member}", config, names, engine
            )
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
    rewritten, record = rewrite_blob_bytes(source.read_bytes(), str(source), config, names, engine)
    with staged_output(output, mode=source.stat().st_mode & 0o7777) as temp:
        temp.write_bytes(rewritten)
    return [record]
