"""Names as reports can carry them: file and member names, symbols, messages.

Names come from the file system, zip and ar members and symbol tables: any bytes. They are
decoded with `surrogateescape`, so a byte that is not UTF-8 becomes a lone surrogate, which a
terminal or a strict JSON reader cannot take. Two renderings, both lossless:

- `lossless` (JSON values): a byte that is not UTF-8 is written `\\xNN` and a backslash `\\\\`,
  so every output string is valid Unicode and the escapes are unambiguous.
- `printable` (text output, SARIF messages, error lines): `lossless`, plus control characters
  (C0, DEL, C1) written `\\xNN` (`\\n`, `\\r`, `\\t` spelled so), so a name cannot move the
  cursor, recolour the terminal or split one location over two lines.
"""

from __future__ import annotations

import re

_NEEDS_LOSSLESS = re.compile(r"[\\\udc80-\udcff]")
_NEEDS_PRINTABLE = re.compile(r"[\\\x00-\x1f\x7f-\x9f\udc80-\udcff]")
_SPELLED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    spelled = _SPELLED.get(char)
    if spelled is not None:
        return spelled
    code = ord(char)
    return f"\\x{code - 0xDC00 if code >= 0xDC80 else code:02x}"


def lossless(text: str) -> str:
    """`text` as valid Unicode for JSON: non-UTF-8 bytes as \\xNN, backslashes doubled."""
    return _NEEDS_LOSSLESS.sub(_escape, text)


def printable(text: str) -> str:
    """`text` safe to print on one line: `lossless` plus control characters as \\xNN."""
    return _NEEDS_PRINTABLE.sub(_escape, text)


def lossless_tree(value: object) -> object:
    """`value` (JSON-ready dicts, lists, strings, numbers) with every string `lossless`."""
    if isinstance(value, str):
        return lossless(value)
    if isinstance(value, dict):
        return {lossless(str(k)): lossless_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [lossless_tree(v) for v in value]
    return value
