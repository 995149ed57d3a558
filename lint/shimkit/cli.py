"""The `shimkit` console script: one subcommand per module in `shimkit.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and
`run(args) -> int`. Exit codes are a bitmask (see `shimkit.exitcodes`).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

from shimkit import __version__
from shimkit.errors import ShimkitError, Terminated
from shimkit.escape import printable
from shimkit.exitcodes import EXIT_ERROR, EXIT_USAGE

# Subcommand name -> (module under shimkit.commands, one-line summary for the
# top-level help). Order is the help order. Only the chosen command's module is
# imported: several pull in numpy or torch, and start-up time is a feature.
COMMANDS: dict[str, tuple[str, str]] = {
    "config": ("config_cmd", "print the effective prefix configuration"),
    "symbols": ("symbols_cmd", "print dynamic imports/exports (the gate's lock format)"),
    "lint": ("lint_cmd", "lint ELF files, archives and .pt2/.pte containers"),
    "gate": ("gate_cmd", "compare shim symbols and violations with a baseline"),
    "header": ("header_cmd", "generate or --check the rename header"),
    "compile": ("compile_cmd", "compile a model into a .pt2 with a prefixed blob"),
    "rewrite": ("rewrite_cmd", "rename a prebuilt blob's shim imports (LIEF)"),
    "run": ("run_cmd", "run a prefixed blob on the slim CPU runtime"),
    "probe": ("probe_cmd", "show which library each shim import of a blob binds to"),
}


CONFIG_HELP = (
    "the prefix file (default: found from the working directory; see `shimkit config`); "
    "accepted before or after the subcommand"
)


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, without parsing the rest."""
    args = iter(argv)
    for token in args:
        if token == "--config":
            next(args, None)
        elif not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def _merge_config(args: argparse.Namespace) -> str | None:
    """`--config` given before and/or after the subcommand: one value, or a usage error."""
    before, after = args.config, getattr(args, "config_after_command", None)
    if before is not None and after is not None and before != after:
        raise ShimkitError(f"--config given twice with different files: {before} and {after}")
    return after if after is not None else before


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the subcommand it names gets its arguments."""
    parser = argparse.ArgumentParser(
        prog="shimkit",
        description="Private, prefixed AOTInductor shim ABI: config, lint, gate, AOT helpers.",
    )
    parser.add_argument("--version", action="version", version=f"shimkit {__version__}")
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = _chosen_command(argv) if argv is not None else None
    for name, (module_name, summary) in COMMANDS.items():
        if argv is not None and name != chosen:
            sub.add_parser(name, help=summary)
            continue
        module = importlib.import_module(f"shimkit.commands.{module_name}")
        command = sub.add_parser(name, help=summary, description=module.HELP)
        command.add_argument(
            "--config", metavar="FILE", dest="config_after_command", help=CONFIG_HELP
        )
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def install_termination_handlers() -> None:
    """SIGTERM and SIGHUP raise `Terminated` (where their default would kill us), so every
    `finally` (staging folders, temp files, compiler children) runs before we exit."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _raise_terminated)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return EXIT_USAGE if exc.code not in (0, None) else 0
    install_termination_handlers()
    try:
        args.config = _merge_config(args)
        return int(args._run(args))
    except ShimkitError as exc:
        print(f"shimkit: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("shimkit: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Terminated as exc:
        print(f"shimkit: terminated ({exc})", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
