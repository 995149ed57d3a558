"""The ELF reader: what the linter needs from an ELF image, bounds-checked.

    read_elf(data, location) -> ElfImage        headers, NEEDED/SONAME, exec stack,
                                                imports/exports as Symbols with versions
    read_elf_names(data, location) -> ElfNames  the same selection as sorted names only
                                                (`shimkit symbols`)

Standard library only; a compiled module (`_symnames`, built with the package)
speeds up `read_elf_names` on big tables and is optional. Malformed input is an
ElfFormatError with one line naming what is wrong. See shimkit.inputs for
finding images in files, directories, archives and containers.
"""

from __future__ import annotations

from shimkit.elf.layout import ELF_MAGIC
from shimkit.elf.model import ElfFormatError, ElfImage, ElfNames, InputError, Symbol
from shimkit.elf.reader import read_elf, read_elf_names

__all__ = [
    "ELF_MAGIC",
    "ElfFormatError",
    "ElfImage",
    "ElfNames",
    "InputError",
    "Symbol",
    "read_elf",
    "read_elf_names",
]
