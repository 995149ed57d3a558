"""The `shimkit` console script: one subcommand per module in `shimkit.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and
`run(args) -> int`. Exit codes are a bitmask (see `shimkit.exitcodes`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from shimkit import __version__
from shimkit.errors import ShimkitError
from shimkit.exitcodes import EXIT_ERROR, EXIT_USAGE

# Subcommand name -> module under shimkit.commands. Order is the help order.
COMMANDS: dict[str, str] = {
    "config": "config_cmd",
    "symbols": "symbols_cmd",
    "header": "header_cmd",
    "compile": "compile_cmd",
    "rewrite": "rewrite_cmd",
    "lint": "lint_cmd",
    "gate": "gate_cmd",
    "run": "run_cmd",
    "probe": "probe_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shimkit",
        description="Private, prefixed AOTInductor shim ABI: config, lint, gate, AOT helpers.",
    )
    parser.add_argument("--version", action="version", version=f"shimkit {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="the prefix file (default: nearest rules/shim_symbol_prefix.bzl)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"shimkit.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return EXIT_USAGE if exc.code not in (0, None) else 0
    try:
        return int(args._run(args))
    except ShimkitError as exc:
        print(f"shimkit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("shimkit: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
