"""What the ELF reader returns: images (full or names only), symbols and per-input errors."""

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
    and from `.symtab` for relocatable objects (`e_type == "REL"`), sorted by
    name (then version). `symbol_table` names the table they were read from
    (None if the image has none); `symbol_count` counts its entries without the
    null entry. A gate must refuse an image whose expected table is missing or
    empty (`has_symbols` is False) instead of passing it.
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


@dataclass
class ElfNames:
    """The names-only view of an image (`read_elf_names`): what `shimkit symbols` prints.

    The names of ElfImage.imports/exports, sorted, each once (a table may list a name
    several times, e.g. with two versions). `symbol_count` counts table entries.
    """

    location: str
    e_type: str
    machine: str
    elf_class: int
    imports: list[str]
    exports: list[str]
    needed: list[str]
    soname: str | None
    size: int
    symbol_table: str | None = None
    symbol_count: int = 0
    offset: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def has_symbols(self) -> bool:
        return self.symbol_table is not None and self.symbol_count > 0


@dataclass(frozen=True)
class InputError:
    """An input that could not be read; `message` is one line saying what is wrong."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class ElfFormatError(Exception):
    """Raised by the reader when bytes are not a readable ELF image."""

    def __init__(self, location: str, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location
        self.message = message

    def as_input_error(self) -> InputError:
        return InputError(self.location, self.message)
