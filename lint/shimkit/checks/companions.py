"""What AOTInductor packs beside each blob of a .pt2: the text companions (`X.wrapper.cpp`,
`X.wrapper.json` for `X.wrapper.so`) and, from the JSON one, the ops the blob leaves to
libtorch's proxy executor (what SK009 and `shimkit compile` name)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from shimkit.errors import ShimkitError
from shimkit.inputs.kinds import pt2_blob_names
from shimkit.inputs.zipc import ZipMemberError, read_member


def read_blob_companions(path: Path, suffix: str) -> dict[str, str]:
    """The text AOTInductor packs next to each blob under its name with `suffix` for
    `.so` (`X.wrapper.cpp`, `X.wrapper.json` for `X.wrapper.so`), by the blob's member
    name; blobs without one are left out."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            return {
                blob: read_member(archive, archive.getinfo(member)).decode("utf-8", "replace")
                for blob in pt2_blob_names(names)
                if (member := blob.removesuffix(".so") + suffix) in names
            }
    except ZipMemberError as exc:
        raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ShimkitError(f"{path}: not a readable .pt2 zip: {exc}") from None


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
