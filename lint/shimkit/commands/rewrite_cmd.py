"""`shimkit rewrite`: make a prebuilt blob (.so or .pt2) import prefixed shim names."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shimkit.config import load_config

HELP = "rename a prebuilt blob's shim imports to the prefixed names (a .so or a .pt2), with LIEF"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("blob", metavar="BLOB", help="a blob .so or a .pt2 package")
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="where to write (default: BLOB with .prefixed before the suffix)",
    )
    target.add_argument("--in-place", action="store_true", help="replace BLOB itself (atomically)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    parser.add_argument(
        "--engine",
        choices=("lief", "patch"),
        default="lief",
        help="lief: LIEF's builder (default); patch: append-only, moves no original byte",
    )


def default_output(source: Path) -> Path:
    return source.with_name(f"{source.stem}.prefixed{source.suffix}")


def run(args: argparse.Namespace) -> int:
    from shimkit.aot.rewrite import rewrite_blob_file

    config = load_config(args.config)
    source = Path(args.blob)
    output = (
        source if args.in_place else Path(args.output) if args.output else default_output(source)
    )
    records = rewrite_blob_file(source, output, config, overwrite=args.force, engine=args.engine)
    for record in records:
        where = f"{output}:{record.member}" if record.member else str(output)
        stack = ", cleared exec stack" if record.cleared_exec_stack else ""
        dropped = (
            f", dropped NEEDED {' '.join(record.dropped_needed)}" if record.dropped_needed else ""
        )
        added = f", added NEEDED {' '.join(record.added_needed)}" if record.added_needed else ""
        print(f"{where}: renamed {len(record.renamed)} shim imports{dropped}{added}{stack}")
    if not any(r.renamed for r in records):
        print(f"{source}: note: no unprefixed shim imports found", file=sys.stderr)
    return 0
