"""Recognising what a buffer is from its first bytes (and, for blobs, its name)."""

from __future__ import annotations

from collections.abc import Iterable

from shimkit.elf import ELF_MAGIC

AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")

# Where a .pt2 package keeps its compiled model shared objects (AOTInductor's layout:
# `<package>/data/aotinductor/<model>/<hash>.wrapper.so`).
PT2_BLOB_DIR = "data/aotinductor/"

# Files with these suffixes are scanned for embedded ELF images even when met
# while walking a directory (ExecuTorch programs and data files).
EMBED_SUFFIXES = (".pte", ".ptd")


def kind_of(head: bytes) -> str | None:
    """'elf', 'ar', 'thin-ar', 'zip' or None."""
    if head.startswith(ELF_MAGIC):
        return "elf"
    if head.startswith(AR_MAGIC):
        return "ar"
    if head.startswith(THIN_AR_MAGIC):
        return "thin-ar"
    if head.startswith(ZIP_MAGICS):
        return "zip"
    return None


def wants_embed_scan(name: str) -> bool:
    return name.lower().endswith(EMBED_SUFFIXES)


def in_pt2_blob_dir(member: str) -> bool:
    """True for a .pt2 member under data/aotinductor/ (below the package's root folder)."""
    return f"/{PT2_BLOB_DIR}" in f"/{member}"


def is_pt2_blob(member: str) -> bool:
    """True for a compiled model shared object of a .pt2 (by its member name)."""
    return in_pt2_blob_dir(member) and member.endswith(".so")


def pt2_blob_names(members: Iterable[str]) -> list[str]:
    """The compiled model shared objects among a .pt2's member names, sorted."""
    return sorted(name for name in members if is_pt2_blob(name))
