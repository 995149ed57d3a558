"""ELF reading for the linter: `read_elf(data, location) -> ElfImage`.

pyelftools for structure, a vectorized numpy path for symbol tables, strict
bounds checks against hostile input. See shimkit.inputs for finding images in
files, directories, archives and containers.
"""

from shimkit.elf.model import ElfFormatError, ElfImage, ElfNames, InputError, Symbol
from shimkit.elf.reader import read_elf, read_elf_names

__all__ = [
    "ElfFormatError",
    "ElfImage",
    "ElfNames",
    "InputError",
    "Symbol",
    "read_elf",
    "read_elf_names",
]
