"""Blobs inside a .pt2 package (a zip): find them, read them, replace them."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from shimkit.errors import ShimkitError
from shimkit.inputs.kinds import is_pt2_blob
from shimkit.inputs.zipc import ZipMemberError, read_member


def is_zip(path: Path) -> bool:
    try:
        return zipfile.is_zipfile(path)
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read: {exc.strerror}") from None


def blob_members(archive: zipfile.ZipFile) -> list[str]:
    """Names of the compiled model shared objects inside a .pt2."""
    return sorted(name for name in archive.namelist() if is_pt2_blob(name))


def read_blobs(path: Path) -> dict[str, bytes]:
    """Every blob in the package at `path`, by member name."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = blob_members(archive)
            if not members:
                raise ShimkitError(f"{path}: a zip but no data/aotinductor/*.so blob inside")
            return {name: read_member(archive, archive.getinfo(name)) for name in members}
    except ZipMemberError as exc:
        raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShimkitError(f"{path}: not a readable .pt2 zip: {exc}") from None


def read_blob_companions(path: Path, suffix: str) -> dict[str, str]:
    """The text AOTInductor packs next to each blob under its name with `suffix` for
    `.so` (`X.wrapper.cpp`, `X.wrapper.json` for `X.wrapper.so`), by the blob's member
    name; blobs without one are left out."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            return {
                blob: read_member(archive, archive.getinfo(member)).decode("utf-8", "replace")
                for blob in blob_members(archive)
                if (member := blob.removesuffix(".so") + suffix) in names
            }
    except ZipMemberError as exc:
        raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShimkitError(f"{path}: not a readable .pt2 zip: {exc}") from None


def read_wrapper_sources(path: Path) -> dict[str, str]:
    """The C++ wrapper source of each blob, by the blob's member name."""
    return read_blob_companions(path, ".cpp")


def proxy_executor_ops(path: Path) -> dict[str, list[str]]:
    """The ops each blob leaves to libtorch's proxy executor because they have no C shim
    (`aten::embedding_renorm`, ...), by the blob's member name: the targets of the nodes
    AOTInductor serializes beside the blob for that executor (`X.wrapper.json`)."""
    found: dict[str, list[str]] = {}
    for blob, text in read_blob_companions(path, ".json").items():
        try:
            nodes = json.loads(text).get("nodes", [])
        except (ValueError, AttributeError):
            continue  # not the executor's node list: nothing to name
        targets = {
            node["node"].get("target")
            for node in nodes
            if isinstance(node, dict) and isinstance(node.get("node"), dict)
        }
        named = sorted(t for t in targets if isinstance(t, str))
        if named:
            found[blob] = named
    return found


def rewrite_blobs(source: Path, target: Path, transform: Callable[[str, bytes], bytes]) -> None:
    """Copy the package, passing each blob member through `transform`; keep the rest."""
    try:
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
            members = set(blob_members(src))
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
