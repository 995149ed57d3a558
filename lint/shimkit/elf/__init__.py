"""ELF reading for the linter: `read_elf(data, location) -> ElfImage`.

pyelftools for structure, a vectorized numpy path for symbol tables, strict
bounds checks against hostile input. `read_elf_names` (the names-only view
behind `shimkit symbols`) needs no numpy; `read_elf`, ElfImage and Symbol are
imported on first use, so importing this package imports neither numpy nor
dataclasses. See shimkit.inputs for
finding images in files, directories, archives and containers.
"""

from __future__ import annotations

from shimkit.elf.model import ElfFormatError, ElfNames, InputError
from shimkit.elf.names import read_names as read_elf_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from shimkit.elf.image import ElfImage, Symbol
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
    # Loaded on first use by callers that want Symbol objects: numpy and dataclasses.
    if name == "read_elf":
        from shimkit.elf.reader import read_elf

        return read_elf
    if name in ("ElfImage", "Symbol"):
        from shimkit.elf import image

        return getattr(image, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
