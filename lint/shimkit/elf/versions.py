"""Symbol versions: .gnu.version (one index per .dynsym entry), resolved through
.gnu.version_d (definitions) and .gnu.version_r (requirements).

The definition/requirement chains are walked with pyelftools under a budget:
their entry counts come from the file, so hostile counts or cyclic `next`
links must not make the walk unbounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

VERSYM_HIDDEN = 0x8000
VER_NDX_GLOBAL = 1
_MIN_ENTRY = 8  # smallest verdaux/vernaux entry: the budget is section size / 8


class VersionError(ValueError):
    """The version sections are malformed; the message is one line."""


def version_names(section: Any, *, needed: bool) -> dict[int, str]:
    """Version index -> name from a pyelftools GNUVerDefSection/GNUVerNeedSection."""
    budget = max(int(section["sh_size"]) // _MIN_ENTRY, 1)
    if int(section["sh_info"]) > budget:
        raise VersionError(
            f"{section.name}: {int(section['sh_info'])} entries cannot fit in "
            f"{int(section['sh_size'])} bytes"
        )
    names: dict[int, str] = {}
    steps = 0
    for entry, aux_iter in section.iter_versions():
        steps += 1
        if needed:
            for aux in aux_iter:
                steps += 1
                if steps > budget:
                    raise VersionError(f"{section.name}: version chain longer than its section")
                names[int(aux["vna_other"]) & 0x7FFF] = aux.name
        else:
            first = next(iter(aux_iter), None)
            if first is not None:
                names[int(entry["vd_ndx"]) & 0x7FFF] = first.name
        if steps > budget:
            raise VersionError(f"{section.name}: version chain longer than its section")
    return names


def resolve_versions(
    versym: np.ndarray, rows: np.ndarray, names: dict[int, str]
) -> list[str | None]:
    """The version name of each symbol row (`rows` = table indices), None if unversioned."""
    if not names:
        return [None] * rows.size
    ndx = (versym[rows] & 0x7FFF).astype(np.int64)
    table: list[str | None] = [None] * (max(int(ndx.max()) if ndx.size else 0, max(names)) + 1)
    for key, value in names.items():
        if key > VER_NDX_GLOBAL:
            table[key] = value
    return [table[i] for i in ndx.tolist()]
