"""Recognising what a buffer is from its first bytes (and, for blobs, its name)."""

from __future__ import annotations

from shimkit.elf import ELF_MAGIC

AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")

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
