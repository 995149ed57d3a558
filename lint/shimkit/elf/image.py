"""The full-read data model (read_elf): symbols with versions, bindings and types.

Dataclasses; kept apart from shimkit.elf.model so that the names-only path
(`shimkit symbols`) does not import the dataclasses module (start-up time).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Symbol:
    """One symbol table entry, as the linter sees it."""

    name: str  # without version suffix
    version: str | None  # e.g. "GLIBC_2.2.5"; None if unversioned
    binding: str  # "GLOBAL" | "WEAK" | "LOCAL" | "GNU_UNIQUE" | "BIND_<n>"
    type: str  # "FUNC" | "OBJECT" | "NOTYPE" | "TLS" | "IFUNC" | ... | "TYPE_<n>"
    defined: bool


@dataclass
class ElfImage:
    """The linter-relevant facts of one ELF image, wherever it was found.

    `imports`/`exports` come from `.dynsym` for shared objects and executables
    and from `.symtab` for relocatable objects (`e_type == "REL"`).
    `symbol_table` names the table they were read from (None if the image has
    none); `symbol_count` counts its entries without the null entry. A gate
    must refuse an image whose expected table is missing or empty
    (`has_symbols` is False) instead of passing it.
    """

    location: str
    elf_class: int  # 32 | 64
    little_endian: bool
    e_type: str  # "REL" | "DYN" | "EXEC" | "CORE" | "NONE" | "TYPE_<n>"
    machine: str  # e.g. "EM_X86_64"
    imports: list[Symbol]
    exports: list[Symbol]
    needed: list[str]
    soname: str | None
    exec_stack: bool | None
    size: int
    symbol_table: str | None = None  # ".dynsym" | ".symtab" | None
    symbol_count: int = 0
    name_prefixes: tuple[str, ...] | None = None  # set when imports/exports were filtered
    offset: int = 0  # where the image starts inside its container (carved images)
    warnings: list[str] = field(default_factory=list)

    @property
    def has_symbols(self) -> bool:
        """True if the image has the symbol table the linter relies on, with entries."""
        return self.symbol_table is not None and self.symbol_count > 0

    @property
    def is_shared_object(self) -> bool:
        return self.e_type == "DYN"
