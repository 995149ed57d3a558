"""Members of zip containers (.pt2 packages, wheels, .zip) with zip-bomb limits."""

from __future__ import annotations

import lzma
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO

from shimkit.inputs.kinds import kind_of, wants_embed_scan
from shimkit.inputs.limits import DEFAULT_LIMITS, Budget, Limits

_CHUNK = 1 << 20
# A broken container (central directory, stream): the whole input is one error.
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError, ValueError)


class ZipMemberError(ValueError):
    """One member could not be read; `member` names it."""

    def __init__(self, member: str, message: str) -> None:
        super().__init__(message)
        self.member = member
        self.message = message


def _read_capped(handle: IO[bytes], name: str, declared: int, cap: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > cap or total > declared:
            raise ZipMemberError(name, f"inflates past its declared or allowed size ({cap} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def check_member(info: zipfile.ZipInfo, limits: Limits) -> None:
    """Refuse (ZipMemberError) a member that is encrypted, too large or inflates suspiciously
    far, from its header alone: nothing is decompressed."""
    name = info.filename
    if info.flag_bits & 0x1:
        raise ZipMemberError(name, "encrypted member: cannot be read; store it unencrypted")
    if info.file_size > limits.max_member_bytes:
        raise ZipMemberError(
            name, f"uncompressed size {info.file_size} exceeds {limits.max_member_bytes}"
        )
    if info.file_size > limits.ratio_floor_bytes and info.file_size > limits.max_ratio * max(
        info.compress_size, 1
    ):
        raise ZipMemberError(
            name,
            f"compression ratio {info.file_size // max(info.compress_size, 1)}:1 "
            f"exceeds {limits.max_ratio}:1 (zip bomb?)",
        )


_MEMBER_ERRORS = (
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)


def read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits = DEFAULT_LIMITS
) -> bytes:
    """One member's bytes under `limits` (checked before and while inflating); every
    problem is a ZipMemberError naming the member."""
    check_member(info, limits)
    try:
        with archive.open(info) as handle:
            return _read_capped(handle, info.filename, info.file_size, limits.max_member_bytes)
    except ZipMemberError:
        raise
    except _MEMBER_ERRORS as exc:
        raise ZipMemberError(info.filename, f"cannot read member: {_one_line(exc)}") from None


def iter_zip_members(
    stream: IO[bytes], budget: Budget
) -> Iterator[tuple[str, bytes] | ZipMemberError]:
    """Yield (name, bytes) for members that are ELF images, archives, zips or embed-scan blobs.

    Other members are skipped after reading at most their first 8 bytes.
    Per-member problems come back as ZipMemberError values (not raised) so the
    other members are still read; a broken central directory raises
    zipfile.BadZipFile.
    """
    limits = budget.limits
    with zipfile.ZipFile(stream) as archive:
        infos = archive.infolist()
        if len(infos) > limits.max_members:
            raise zipfile.BadZipFile(f"{len(infos)} members (limit {limits.max_members})")
        for info in sorted(infos, key=lambda i: i.filename):
            if info.is_dir():
                continue
            name = info.filename
            try:
                check_member(info, limits)
                with archive.open(info) as handle:
                    head = handle.read(8)
                    if kind_of(head) is None and not wants_embed_scan(name):
                        continue
                    if not budget.take(info.file_size):
                        raise ZipMemberError(
                            name,
                            f"total uncompressed bytes exceed {limits.max_total_bytes} (zip bomb?)",
                        )
                    rest = _read_capped(
                        handle, name, info.file_size - len(head), limits.max_member_bytes
                    )
                yield name, head + rest
            except ZipMemberError as exc:
                yield exc
            except _MEMBER_ERRORS as exc:
                yield ZipMemberError(name, f"cannot read member: {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
