"""`shimkit symbols`: the dynamic imports and exports of every ELF image under PATHs.

The JSON form is the lock file of the gate: names without version suffixes,
sorted, deterministic. Schema `shimkit.symbols/v1`:

    {"schema": "shimkit.symbols/v1",
     "artifacts": [{"path", "type", "machine", "class", "imports", "exports",
                    "needed", "soname", "symbol_table", "symbol_count", "warnings"}],
     "errors": [{"path", "message"}]}

`symbol_table` is null when the image has no table of the kind the linter
needs (.dynsym; .symtab for .o files); a gate must refuse such an image
(and one whose `symbol_count` is 0) instead of passing it.
"""

from __future__ import annotations

import sys
from itertools import compress, islice
from operator import eq, ne

from shimkit.elf import ElfNames, InputError
from shimkit.elf.fastnames import SortedNames
from shimkit.escape import lossless, printable
from shimkit.exitcodes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from shimkit.inputs import SkippedInput, iter_names

try:  # json's C string encoder without the json package (which imports its decoder too)
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - an interpreter without the _json accelerator
    from json.encoder import encode_basestring_ascii as _quote  # type: ignore[attr-defined]

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

HELP = "print the dynamic imports and exports of ELF files, archives and containers"
SCHEMA = "shimkit.symbols/v1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files, directories, .a, .pt2")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--no-follow-symlinks",
        dest="follow_symlinks",
        action="store_false",
        help="do not follow symlinks met while walking directories",
    )


class SimpleArgs:
    """What `add_arguments` parses, for the command lines `parse_simple` takes."""

    __slots__ = ("follow_symlinks", "format", "paths")

    def __init__(self, paths: list[str], fmt: str, follow_symlinks: bool) -> None:
        self.paths = paths
        self.format = fmt
        self.follow_symlinks = follow_symlinks


def parse_simple(argv: list[str]) -> SimpleArgs | None:
    """The usual command lines (`[--format json|text] [--no-follow-symlinks] PATH...`,
    options before or after the paths) without argparse, whose import costs start-up
    time; None for anything else (help, abbreviations, `--`, paths starting with "-",
    usage errors): argparse parses those, with its messages. The arguments are what
    argparse would give (a test checks both on many command lines)."""
    paths: list[str] = []
    fmt = "text"
    follow = True
    after_paths = False  # argparse takes PATH... as one run: no path after an option
    tokens = iter(argv)
    for token in tokens:
        if token == "--format" or token.startswith("--format="):
            value = token[len("--format=") :] if "=" in token else next(tokens, None)
            if value not in ("json", "text"):
                return None
            fmt = value
            after_paths = bool(paths)
        elif token == "--no-follow-symlinks":
            follow = False
            after_paths = bool(paths)
        elif token.startswith("-") or after_paths:
            return None
        else:
            paths.append(token)
    return SimpleArgs(paths, fmt, follow) if paths else None


def _unique(names: list[str]) -> list[str]:
    """Sorted input -> sorted, without repeats (a name may have several versions).

    Repeats are neighbours: compare each name with the one before (C loops, no hashing);
    without repeats (the usual case) the list itself comes back, not a copy.
    """
    if not any(map(eq, islice(names, 1, None), names)):
        return names
    return [names[0], *compress(islice(names, 1, None), map(ne, islice(names, 1, None), names))]


def _names(image: ElfNames, field: str) -> list[str] | SortedNames:
    """Sorted names of `field` without repeats. The C helper's packed names stay packed
    when no name needs a JSON escape: the writers join them in C, no list of str."""
    packed = image.packed(field)
    if packed is not None and packed.plain:
        return packed
    return _unique(getattr(image, field))


def _listed(names: list[str] | SortedNames) -> list[str]:
    if isinstance(names, SortedNames):
        return names.unique_joined(b"\0").decode("ascii").split("\0") if names.count else []
    return names


def artifact_record(image: ElfNames) -> dict[str, Any]:
    """The JSON object of one image; `imports` and `exports` may be SortedNames (see
    `_names`): pass the record to write_json, or `_listed` them."""
    return {
        "path": image.location,
        "type": image.e_type,
        "machine": image.machine,
        "class": image.elf_class,
        "imports": _names(image, "imports"),
        "exports": _names(image, "exports"),
        "needed": image.needed,
        "soname": image.soname,
        "symbol_table": image.symbol_table,
        "symbol_count": image.symbol_count,
        "warnings": image.warnings,
    }


def collect(
    paths: list[str], *, follow_symlinks: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    artifacts: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for item in iter_names(paths, follow_symlinks=follow_symlinks):
        if isinstance(item, InputError):
            errors.append({"path": item.location, "message": item.message})
        elif isinstance(item, SkippedInput):
            where = printable(item.location)
            sys.stderr.write(f"shimkit symbols: note: {where}: skipped: {item.reason}\n")
        else:
            artifacts.append(artifact_record(item))
    return artifacts, errors


def _write_text(out: TextIO, artifacts: list[dict[str, Any]]) -> None:
    lines: list[str] = []
    for art in artifacts:
        # File and member names are escaped (one line each); symbol names are written
        # as their bytes (the lock format), below.
        lines.append(f"{printable(art['path'])}: {art['type']} {art['machine']} {art['class']}-bit")
        if art["soname"]:
            lines.append(f"  soname {art['soname']}")
        lines.extend(f"  needed {name}" for name in art["needed"])
        if art["symbol_table"] is None:
            lines.append("  no symbol table")
        lines.extend(f"  warning {text}" for text in art["warnings"])
        lines.extend(f"  import {name}" for name in _listed(art["imports"]))
        lines.extend(f"  export {name}" for name in _listed(art["exports"]))
    text = "\n".join(lines) + ("\n" if lines else "")
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(text)
        return
    # Symbol names that are not UTF-8 were decoded with surrogateescape: write their
    # original bytes back, whatever the locale's stdout error handler is.
    out.flush()
    buffer.write(text.encode("utf-8", "surrogateescape"))
    buffer.flush()


# What json.dumps (ensure_ascii) writes as it is: printable ASCII but '"' and '\\'.
_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")


def _plain_strings(value: list[Any], inner: str) -> bytes | None:
    """The items of a list of strings joined as JSON strings are (without the outer
    quotes), when no item needs escaping: one C join instead of one call per item.
    None when the list holds something else or an item needs escaping."""
    try:
        body = f'",\n{inner}"'.join(value).encode("ascii")
    except (TypeError, UnicodeEncodeError):
        return None
    # Without its plain characters, a separator leaves '"\n"'; any other leftover is a
    # character inside an item that json would escape.
    if body.translate(None, _PLAIN) != b'"\n"' * (len(value) - 1):
        return None
    return body


def _json_chunks(value: Any, indent: str, chunks: list[bytes]) -> None:
    """json.dumps(indent=1, sort_keys=True) as ASCII chunks, at C speed: json's
    pure-Python indenting encoder takes longer than reading libtorch's table. One list
    item per line (diff-friendly lock files)."""
    if isinstance(value, SortedNames):  # plain names (see _names): one C join
        if not value.count:
            chunks.append(b"[]")
            return
        inner = indent + " "
        body = value.unique_joined(f'",\n{inner}"'.encode())
        chunks += (f'[\n{inner}"'.encode(), body, f'"\n{indent}]'.encode())
        return
    if isinstance(value, list) and value:
        inner = indent + " "
        body = _plain_strings(value, inner)  # symbol lists
        if body is not None:
            chunks += (f'[\n{inner}"'.encode(), body, f'"\n{indent}]'.encode())
            return
        chunks.append(f"[\n{inner}".encode())
        if all(isinstance(item, str) for item in value):
            chunks.append(f",\n{inner}".join(_quote(lossless(item)) for item in value).encode())
        else:
            for k, item in enumerate(value):
                if k:
                    chunks.append(f",\n{inner}".encode())
                _json_chunks(item, inner, chunks)
        chunks.append(f"\n{indent}]".encode())
        return
    if isinstance(value, dict) and value:
        inner = indent + " "
        chunks.append(b"{\n")
        for k, key in enumerate(sorted(value)):
            lead = f",\n{inner}" if k else inner
            chunks.append(f"{lead}{_quote(key)}: ".encode())
            _json_chunks(value[key], inner, chunks)
        chunks.append(f"\n{indent}}}".encode())
        return
    chunks.append(_scalar(value).encode())


def _scalar(value: Any) -> str:
    """json.dumps(value) for what the records hold, without the json package."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):  # names that are not UTF-8: \xNN, never a lone surrogate
        return _quote(lossless(value))  # type: ignore[no-any-return]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, list | dict) and not value:
        return "[]" if isinstance(value, list) else "{}"
    import json  # anything else (floats): json's own rules

    return json.dumps(value)


def write_json(out: TextIO, artifacts: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
    doc = {"schema": SCHEMA, "artifacts": artifacts, "errors": errors}
    chunks: list[bytes] = []
    _json_chunks(doc, "", chunks)
    chunks.append(b"\n")
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(b"".join(chunks).decode("ascii"))
        return
    out.flush()  # the document is ASCII (json escapes the rest): bytes straight to the file
    buffer.writelines(chunks)
    buffer.flush()


def run(args: argparse.Namespace | SimpleArgs) -> int:
    artifacts, errors = collect(args.paths, follow_symlinks=args.follow_symlinks)
    if args.format == "json":
        write_json(sys.stdout, artifacts, errors)
    else:
        _write_text(sys.stdout, artifacts)
    for err in errors:
        print(f"shimkit: error: {printable(err['path'] + ': ' + err['message'])}", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m shimkit.commands.symbols_cmd`: the same command without loading every
    other subcommand's imports (the fast entry for huge libraries and benchmarks)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    simple = parse_simple(argv)
    if simple is not None:
        return run(simple)
    import argparse

    parser = argparse.ArgumentParser(prog="shimkit symbols", description=HELP)
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
