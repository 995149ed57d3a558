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

import argparse
import json
import sys
from itertools import compress, islice
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from operator import eq, ne

from shimkit.elf import ElfNames, InputError
from shimkit.exitcodes import EXIT_ERROR, EXIT_OK
from shimkit.inputs import iter_names

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
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


def _unique(names: list[str]) -> list[str]:
    """Sorted input -> sorted, without repeats (a name may have several versions).

    Repeats are neighbours: compare each name with the one before (C loops, no hashing);
    without repeats (the usual case) the list itself comes back, not a copy.
    """
    if not any(map(eq, islice(names, 1, None), names)):
        return names
    return [names[0], *compress(islice(names, 1, None), map(ne, islice(names, 1, None), names))]


def artifact_record(image: ElfNames) -> dict[str, Any]:
    return {
        "path": image.location,
        "type": image.e_type,
        "machine": image.machine,
        "class": image.elf_class,
        "imports": _unique(image.imports),
        "exports": _unique(image.exports),
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
        else:
            artifacts.append(artifact_record(item))
    return artifacts, errors


def _write_text(out: TextIO, artifacts: list[dict[str, Any]]) -> None:
    lines: list[str] = []
    for art in artifacts:
        lines.append(f"{art['path']}: {art['type']} {art['machine']} {art['class']}-bit")
        if art["soname"]:
            lines.append(f"  soname {art['soname']}")
        lines.extend(f"  needed {name}" for name in art["needed"])
        if art["symbol_table"] is None:
            lines.append("  no symbol table")
        lines.extend(f"  warning {text}" for text in art["warnings"])
        lines.extend(f"  import {name}" for name in art["imports"])
        lines.extend(f"  export {name}" for name in art["exports"])
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
    if isinstance(value, list) and value:
        inner = indent + " "
        body = _plain_strings(value, inner)  # symbol lists
        if body is not None:
            chunks += (f'[\n{inner}"'.encode(), body, f'"\n{indent}]'.encode())
            return
        chunks.append(f"[\n{inner}".encode())
        if all(isinstance(item, str) for item in value):
            chunks.append(f",\n{inner}".join(map(encode_basestring_ascii, value)).encode())
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
            chunks.append(f"{lead}{json.dumps(key)}: ".encode())
            _json_chunks(value[key], inner, chunks)
        chunks.append(f"\n{indent}}}".encode())
        return
    chunks.append(json.dumps(value).encode())


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


def run(args: argparse.Namespace) -> int:
    artifacts, errors = collect(args.paths, follow_symlinks=args.follow_symlinks)
    if args.format == "json":
        write_json(sys.stdout, artifacts, errors)
    else:
        _write_text(sys.stdout, artifacts)
    for err in errors:
        print(f"shimkit: error: {err['path']}: {err['message']}", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m shimkit.commands.symbols_cmd`: the same command without loading every
    other subcommand's imports (the fast entry for huge libraries and benchmarks)."""
    parser = argparse.ArgumentParser(prog="shimkit symbols", description=HELP)
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code not in (0, None) else 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
