"""The data model of the ELF reader: symbols, images and per-input errors.

ElfNames, InputError and ElfFormatError are plain classes: the names-only path
of `shimkit symbols` loads this module, and importing `dataclasses` (with
`inspect`) and building dataclasses costs it more start-up time than reading a
big table. Symbol and ElfImage (read_elf) are dataclasses in shimkit.elf.image,
importable from here as before.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from shimkit.elf.fastnames import SortedNames

_NAMES_FIELDS = (
    "location", "e_type", "machine", "elf_class", "imports", "exports", "needed", "soname",
    "size", "symbol_table", "symbol_count", "offset", "warnings",
)  # fmt: skip


class ElfNames:
    """The names-only view of an image (`read_elf_names`): what `shimkit symbols` prints.

    Same selection and order as ElfImage.imports/exports, as plain sorted
    names (duplicates kept: one per table entry). Compares equal field by field.

    `imports` and `exports` may be given as SortedNames (the C helper's packed
    answer): they become lists of str on first access; until then `packed()`
    hands them out as they are (`shimkit symbols` writes them without a list).
    """

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __init__(
        self,
        location: str,
        e_type: str,
        machine: str,
        elf_class: int,
        imports: list[str] | SortedNames,
        exports: list[str] | SortedNames,
        needed: list[str],
        soname: str | None,
        size: int,
        symbol_table: str | None = None,
        symbol_count: int = 0,
        offset: int = 0,
        warnings: list[str] | None = None,
    ) -> None:
        self.location = location
        self.e_type = e_type
        self.machine = machine
        self.elf_class = elf_class
        self.imports = imports
        self.exports = exports
        self.needed = needed
        self.soname = soname
        self.size = size
        self.symbol_table = symbol_table
        self.symbol_count = symbol_count
        self.offset = offset
        self.warnings: list[str] = [] if warnings is None else warnings

    @property
    def imports(self) -> list[str]:
        value = self._imports
        if value.__class__ is list:
            return value  # type: ignore[return-value]
        self._imports = names = value.names()  # type: ignore[union-attr]
        return names

    @imports.setter
    def imports(self, value: list[str] | SortedNames) -> None:
        self._imports = value

    @property
    def exports(self) -> list[str]:
        value = self._exports
        if value.__class__ is list:
            return value  # type: ignore[return-value]
        self._exports = names = value.names()  # type: ignore[union-attr]
        return names

    @exports.setter
    def exports(self, value: list[str] | SortedNames) -> None:
        self._exports = value

    def packed(self, field: str) -> SortedNames | None:
        """`imports` or `exports` as the helper packed them; None once a list (or if
        it never was packed)."""
        if field not in ("imports", "exports"):
            raise ValueError(f"no names field {field!r} (imports or exports)")
        value = self._imports if field == "imports" else self._exports
        return None if value.__class__ is list else value  # type: ignore[return-value]

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _NAMES_FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in _NAMES_FIELDS)
        return f"ElfNames({inner})"

    @property
    def has_symbols(self) -> bool:
        return self.symbol_table is not None and self.symbol_count > 0


class InputError:
    """An input that could not be read; `message` is one line saying what is wrong.

    Immutable and hashable, compared by (location, message).
    """

    __slots__ = ("location", "message")
    location: str
    message: str

    def __init__(self, location: str, message: str) -> None:
        object.__setattr__(self, "location", location)
        object.__setattr__(self, "message", message)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: InputError is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: InputError is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.location, self.message) == (other.location, other.message)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.location, self.message))

    def __repr__(self) -> str:
        return f"InputError(location={self.location!r}, message={self.message!r})"

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class ElfFormatError(Exception):
    """Raised by `read_elf` when bytes are not a readable ELF image."""

    def __init__(self, location: str, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location
        self.message = message

    def as_input_error(self) -> InputError:
        return InputError(self.location, self.message)


def __getattr__(name: str) -> Any:
    if name in ("Symbol", "ElfImage"):  # dataclasses: loaded by the full-read path only
        from shimkit.elf import image

        return getattr(image, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
