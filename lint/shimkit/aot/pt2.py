"""Blobs inside a .pt2 package (a zip): find them, read them, replace them."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

from shimkit.checks.companions import read_blob_companions
from shimkit.errors import ShimkitError
from shimkit.inputs.kinds import pt2_blob_names
from shimkit.inputs.zipc import ZipMemberError, read_member


def is_zip(path: Path) -> bool:
    try:
        return zipfile.is_zipfile(path)
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read: {exc.strerror}") from None


def read_blobs(path: Path) -> dict[str, bytes]:
    """Every blob in the package at `path`, by member name."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = pt2_blob_names(archive.namelist())
            if not members:
                raise ShimkitError(f"{path}: a zip but no data/aotinductor/*.so blob inside")
            return {name: read_member(archive, archive.getinfo(name)) for name in members}
    except ZipMemberError as exc:
        raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShimkitError(f"{path}: not a readable .pt2 zip: {exc}") from None


def read_wrapper_sources(path: Path) -> dict[str, str]:
    """The C++ wrapper source of each blob, by the blob's member name."""
    return read_blob_companions(path, ".cpp")


def rewrite_blobs(source: Path, target: Path, transform: Callable[[str, bytes], bytes]) -> None:
    """Copy the package, passing each blob member through `transform`; keep the rest."""
    try:
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
            members = set(pt2_blob_names(src.namelist()))
            if not members:
                raise ShimkitError(f"{source}: a zip but no data/aotinductor/*.so blob inside")
            for info in src.infolist():
                data = read_member(src, info)
                if info.filename in members:
                    data = transform(info.filename, data)
                dst.writestr(info, data, compress_type=info.compress_type)
    except ZipMemberError as exc:
        raise ShimkitError(f"{source}!{exc.member}: {exc.message}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShimkitError(f"{source}: not a readable .pt2 zip: {exc}") from None
