"""`shimkit symbols`: the dynamic imports and exports of every ELF image under PATHs.

The JSON form is the lock file of the gate: names without version suffixes,
sorted, deterministic, one name per line. Schema `shimkit.symbols/v1`:

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
from typing import Any, TextIO

from shimkit.elf import ElfNames, InputError
from shimkit.escape import lossless_tree, printable
from shimkit.exitcodes import EXIT_ERROR, EXIT_OK
from shimkit.inputs import SkippedInput, iter_names

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


def artifact_record(image: ElfNames) -> dict[str, Any]:
    """The JSON object of one image."""
    return {
        "path": image.location,
        "type": image.e_type,
        "machine": image.machine,
        "class": image.elf_class,
        "imports": image.imports,
        "exports": image.exports,
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


def _tagged(tag: str, names: list[str]) -> list[str]:
    """`  tag name` for each name, as one block of lines (one join: libtorch has 75k)."""
    return [f"  {tag} " + f"\n  {tag} ".join(names)] if names else []


def render_text(artifacts: list[dict[str, Any]]) -> str:
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
        lines.extend(_tagged("import", art["imports"]))
        lines.extend(_tagged("export", art["exports"]))
    return "\n".join(lines) + ("\n" if lines else "")


def render_json(artifacts: list[dict[str, Any]], errors: list[dict[str, str]]) -> str:
    """One list item (and one key) per line: lock files diff name by name. Written by the
    json module's C encoder (a line break in the separator, not `indent`, whose encoder is
    pure Python and took most of the time for torch's 75k names). Names that are not UTF-8
    are written \\xNN (shimkit.escape.lossless), never as lone surrogates."""
    doc = {"schema": SCHEMA, "artifacts": artifacts, "errors": errors}
    return json.dumps(lossless_tree(doc), separators=(",\n", ": "), sort_keys=True) + "\n"


def write_utf8(out: TextIO, text: str) -> None:
    """Symbol names that are not UTF-8 were decoded with surrogateescape: write their
    original bytes back, whatever the locale's stdout error handler is."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(text)
        return
    out.flush()
    buffer.write(text.encode("utf-8", "surrogateescape"))
    buffer.flush()


def run(args: argparse.Namespace) -> int:
    artifacts, errors = collect(args.paths, follow_symlinks=args.follow_symlinks)
    if args.format == "json":
        write_utf8(sys.stdout, render_json(artifacts, errors))
    else:
        write_utf8(sys.stdout, render_text(artifacts))
    for err in errors:
        print(f"shimkit: error: {printable(err['path'] + ': ' + err['message'])}", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_OK
