"""Limits that keep hostile inputs (zip bombs, deep nesting, huge archives) bounded."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """How much of a hostile input is read before it is refused."""

    max_depth: int = 4  # containers inside containers ("a.whl!b.pt2!c.so" is depth 2)
    max_members: int = 100_000  # entries in one zip or ar archive
    max_member_bytes: int = 2 * GiB  # uncompressed size of one member read into memory
    max_total_bytes: int = 8 * GiB  # uncompressed bytes read from one top-level input
    max_ratio: int = 200  # uncompressed/compressed size of one zip member...
    ratio_floor_bytes: int = 16 * MiB  # ...checked only for members larger than this
    max_embedded: int = 10_000  # ELF images carved from one blob


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
