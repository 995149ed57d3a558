"""Names as reports can carry them: file and member names, symbols, messages.

Names come from the file system, zip and ar members and symbol tables: any bytes. They are
decoded with `surrogateescape`, so a byte that is not UTF-8 becomes a lone surrogate, which a
terminal or a strict JSON reader cannot take. Two renderings, both lossless:

- `lossless` (JSON values): a byte that is not UTF-8 is written `\\xNN` and a backslash `\\\\`,
  so every output string is valid Unicode and the escapes are unambiguous.
- `printable` (text output, SARIF messages, error lines): `lossless`, plus control characters
  (C0, DEL, C1) written `\\xNN` (`\\n`, `\\r`, `\\t` spelled so), and the Unicode line
  separators and bidirectional overrides written `\\uNNNN`, so a name cannot move the cursor,
  recolour the terminal, split one location over two lines or reorder what is shown.

Both are `str.translate` tables, not regular expressions: `re` costs `shimkit symbols`
several milliseconds of start-up.
"""

from __future__ import annotations

_SPELLED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A lone surrogate U+DC80..U+DCFF is the undecodable byte 0x80..0xFF.
_LOSSLESS = {0x5C: "\\\\", **{0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)}}
_PRINTABLE = {
    **_LOSSLESS,
    **{c: _SPELLED.get(chr(c), f"\\x{c:02x}") for c in [*range(0x20), *range(0x7F, 0xA0)]},
    **{c: f"\\u{c:04x}" for c in [0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]},
}


def _unchanged_by_lossless(text: str) -> bool:
    # ASCII without a backslash: nothing to escape (the check runs in C; `translate` looks
    # every character up in a dict, which costs `symbols --format json` most of its time).
    return text.isascii() and "\\" not in text


def lossless(text: str) -> str:
    """`text` as valid Unicode for JSON: non-UTF-8 bytes as \\xNN, backslashes doubled."""
    return text if _unchanged_by_lossless(text) else text.translate(_LOSSLESS)


def printable(text: str) -> str:
    """`text` safe to print on one line: `lossless` plus control characters as \\xNN."""
    return text.translate(_PRINTABLE)


def restore(text: str) -> str:
    """The inverse of `lossless` (for files we wrote with it, e.g. baselines)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and text.startswith("\\", i + 1):
            out.append("\\")
            i += 2
        elif char == "\\" and text.startswith("x", i + 1) and _is_hex_byte(text[i + 2 : i + 4]):
            out.append(chr(0xDC00 + int(text[i + 2 : i + 4], 16)))
            i += 4
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _is_hex_byte(digits: str) -> bool:
    return len(digits) == 2 and all(c in "0123456789abcdef" for c in digits) and digits >= "80"


def lossless_tree(value: object) -> object:
    """`value` (JSON-ready dicts, lists, strings, numbers) with every string `lossless`."""
    if isinstance(value, str):
        return lossless(value)
    if isinstance(value, dict):
        return {lossless(str(k)): lossless_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        # A symbol table's names, checked in one pass when none needs escaping.
        if all(type(v) is str for v in value) and _unchanged_by_lossless("".join(value)):
            return list(value)
        return [lossless_tree(v) for v in value]
    return value
