"""Members of System V / GNU / BSD `ar` archives (static libraries), without copying."""

from __future__ import annotations

from collections.abc import Iterator

from shimkit.inputs.kinds import AR_MAGIC

_HEADER = 60


class ArchiveError(ValueError):
    """The archive is malformed; the message is one line."""


def iter_members(data: memoryview, max_members: int) -> Iterator[tuple[str, memoryview]]:
    """Yield (member name, member bytes) for every regular member (not symbol/name tables)."""
    size = len(data)
    pos = len(AR_MAGIC)
    long_names = b""
    count = 0
    seen: dict[str, int] = {}
    while pos + 1 <= size:
        if pos + _HEADER > size:
            if bytes(data[pos:]).strip(b"\n") == b"":
                return
            raise ArchiveError(f"truncated member header at 0x{pos:x}")
        header = bytes(data[pos : pos + _HEADER])
        if header[58:60] != b"`\n":
            raise ArchiveError(f"bad member header magic at 0x{pos:x}")
        raw_name = header[:16].rstrip(b" ")
        try:
            length = int(header[48:58].strip() or b"0")
        except ValueError:
            raise ArchiveError(f"bad member size field at 0x{pos:x}") from None
        start = pos + _HEADER
        end = start + length
        if length < 0 or end > size:
            raise ArchiveError(
                f"member at 0x{pos:x} extends past end of archive (0x{end:x} > 0x{size:x})"
            )
        body = data[start:end]
        pos = end + (end & 1)  # members are 2-byte aligned
        count += 1
        if count > max_members:
            raise ArchiveError(f"more than {max_members} members")
        if raw_name in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            continue  # symbol index
        if raw_name == b"//":
            long_names = bytes(body)
            continue
        if raw_name.startswith(b"#1/"):  # BSD: name stored before the data
            try:
                name_len = int(raw_name[3:])
            except ValueError:
                raise ArchiveError(f"bad BSD member name at 0x{start - _HEADER:x}") from None
            if name_len > length:
                raise ArchiveError(f"BSD member name longer than member at 0x{start:x}")
            name = bytes(body[:name_len]).rstrip(b"\0")
            body = body[name_len:]
        elif raw_name.startswith(b"/") and raw_name[1:].isdigit():  # GNU long name
            offset = int(raw_name[1:])
            if offset >= len(long_names):
                raise ArchiveError(f"long name offset {offset} past the name table")
            stop = long_names.find(b"/\n", offset)
            name = long_names[offset : stop if stop >= 0 else len(long_names)]
        else:
            name = raw_name[:-1] if raw_name.endswith(b"/") else raw_name
        text = name.decode("utf-8", "replace") or f"member@0x{start:x}"
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:  # duplicate names are legal in ar: keep locations unique
            text = f"{text}#{seen[text]}"
        yield text, body
