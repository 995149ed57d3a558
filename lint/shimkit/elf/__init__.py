"""ELF reading for the linter: `read_elf(data, location) -> ElfImage`.

pyelftools for structure, a vectorized numpy path for symbol tables, strict
bounds checks against hostile input. `read_elf_names` (the names-only view
behind `shimkit symbols`) needs no numpy; `read_elf` is imported on first use,
so importing this package does not import numpy. See shimkit.inputs for
finding images in files, directories, archives and containers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shimkit.elf.model import ElfFormatError, ElfImage, ElfNames, InputError, Symbol
from shimkit.elf.names import read_names as read_elf_names

if TYPE_CHECKING:
    from shimkit.elf.reader import read_elf

__all__ = [
    "ElfFormatError",
    "ElfImage",
    "ElfNames",
    "InputError",
    "Symbol",
    "read_elf",
    "read_elf_names",
]


def __getattr__(name: str) -> Any:
    if name == "read_elf":  # numpy: loaded only by callers that want Symbol objects
        from shimkit.elf.reader import read_elf

        return read_elf
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
