"""Limits that keep hostile inputs (zip bombs, deep nesting, huge archives) bounded."""

from __future__ import annotations

MiB = 1 << 20
GiB = 1 << 30


_FIELDS = (  # in the order of Limits' arguments
    "max_depth", "max_members", "max_member_bytes", "max_total_bytes", "max_ratio",
    "ratio_floor_bytes", "max_embedded",
)  # fmt: skip


class Limits:
    """Immutable, compared by value (a plain class: no dataclasses import on the
    `shimkit symbols` path)."""

    __slots__ = _FIELDS

    def __init__(
        self,
        max_depth: int = 4,  # containers inside containers ("a.whl!b.pt2!c.so" is depth 2)
        max_members: int = 100_000,  # entries in one zip or ar archive
        max_member_bytes: int = 2 * GiB,  # uncompressed size of one member read into memory
        max_total_bytes: int = 8 * GiB,  # uncompressed bytes read from one top-level input
        max_ratio: int = 200,  # uncompressed/compressed size of one zip member...
        ratio_floor_bytes: int = 16 * MiB,  # ...checked only for members larger than this
        max_embedded: int = 10_000,  # ELF images carved from one blob
    ) -> None:
        values = locals()
        for name in _FIELDS:
            object.__setattr__(self, name, values[name])

    def _values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: Limits is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in _FIELDS)
        return f"Limits({inner})"


DEFAULT_LIMITS = Limits()


class Budget:
    """Uncompressed bytes still allowed for one top-level input."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.left = limits.max_total_bytes

    def take(self, amount: int) -> bool:
        if amount > self.left:
            return False
        self.left -= amount
        return True
