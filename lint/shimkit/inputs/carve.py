"""Finding ELF images embedded at any offset of another file (e.g. an ExecuTorch .pte)."""

from __future__ import annotations

from collections.abc import Iterator

from shimkit.elf.layout import ELF_MAGIC, MalformedElf, parse_layout

_VALID_E_TYPES = (1, 2, 3, 4)


def iter_embedded(
    data: bytes, view: memoryview, limit: int
) -> Iterator[tuple[int, int] | tuple[int, str]]:
    """Yield (offset, extent) for each embedded ELF image, or (offset, message) for one whose
    identification is valid but whose tables do not fit (a truncated image).

    A candidate must have the magic, a valid class/data/version and the exact
    e_ehsize of its class; the image is carved by its header-declared extent
    and scanning resumes after it (images inside an image are part of it).
    """
    pos = data.find(ELF_MAGIC)
    found = 0
    while pos >= 0:
        try:
            layout = parse_layout(view[pos:], strict_ident=True)
        except MalformedElf as exc:
            message = str(exc)
            if message.startswith(("truncated", "bad e_sh", "bad e_ph")) and _ident_ok(data, pos):
                found += 1
                yield pos, message
            pos = data.find(ELF_MAGIC, pos + 1)
            continue
        no_tables = not layout.sections and not layout.segments
        if layout.e_type not in _VALID_E_TYPES or no_tables:
            pos = data.find(ELF_MAGIC, pos + 1)
            continue
        found += 1
        if found > limit:
            yield pos, f"more than {limit} embedded ELF images"
            return
        yield pos, layout.extent
        pos = data.find(ELF_MAGIC, pos + max(layout.extent, 1))


def _ident_ok(data: bytes, pos: int) -> bool:
    ident = data[pos : pos + 20]
    if len(ident) < 20 or ident[4] not in (1, 2) or ident[5] not in (1, 2) or ident[6] != 1:
        return False
    e_type = int.from_bytes(ident[16:18], "little" if ident[5] == 1 else "big")
    return e_type in _VALID_E_TYPES
