"""The shim names shimkit knows without torch, and the prefix a symbol name carries.

The list is the one the generated rename header holds (`shimkit header`: every
C shim torch declares), read from the header shipped with shimkit (or this
checkout's). With it the linter tells `acme_aoti_torch_empty_strided` (a shim
under another prefix) from an unrelated name that merely contains `torch_`:
only a KNOWN shim name after the prefix counts.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from shimkit.errors import ShimkitError

# `#define aoti_torch_x SHIMKIT_PASTE(AOTI_SHIM_SYMBOL_PREFIX, aoti_torch_x)`
_RENAME_LINE = re.compile(r"^#define (\w+) SHIMKIT_PASTE\(\w+, \1\)$", re.MULTILINE)
# What a shim prefix can be: the start of a C identifier, not an Itanium-mangled name.
_PREFIX = re.compile(r"(?!_Z)[A-Za-z_][A-Za-z0-9_]*\Z")


def names_in_rename_header(text: str) -> frozenset[str]:
    return frozenset(_RENAME_LINE.findall(text))


@lru_cache(maxsize=4)
def _read(path: Path) -> frozenset[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ShimkitError(f"{path}: cannot read the rename header: {exc}") from None
    names = names_in_rename_header(text)
    if not names:
        raise ShimkitError(f"{path}: no shim names in the rename header (regenerate it)")
    return names


def known_shim_names() -> frozenset[str] | None:
    """The shim names of the rename header shipped with shimkit; None if it has none."""
    from shimkit.native import rename_header

    path = rename_header()
    return None if path is None else _read(path)


def shim_prefix(name: str, families: tuple[str, ...], known: frozenset[str]) -> str | None:
    """The prefix `name` carries before a known shim name ("" for a bare shim name), or
    None if no known shim name ends it after a possible prefix (a C identifier start, not
    a mangled C++ name). The shortest such prefix wins, so `acme_aoti_torch_x` gives
    "acme_" even if `torch_x` were a known name too."""
    if name in known:
        return ""
    best: int | None = None
    for family in families:
        start = name.find(family, 1)
        while start > 0 and (best is None or start < best):
            if name[start:] in known and _PREFIX.match(name[:start]):
                best = start
                break
            start = name.find(family, start + 1)
    return None if best is None else name[:best]
