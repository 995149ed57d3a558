"""`shimkit lint PATH...`: run the rules table over ELF files and report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

from shimkit import DOCS_URL
from shimkit.checks import LintResult
from shimkit.checks.run import LintOptions, run_lint
from shimkit.config import load_config
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically
from shimkit.gate.baseline import relative_location
from shimkit.gate.suppressions import apply_suppressions, load_suppressions
from shimkit.progress import ProgressBar
from shimkit.report import FORMATS, SarifOptions, render

HELP = "lint ELF files, directories, archives and .pt2 packages for shim-ABI violations"


def add_lint_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by `lint` and `gate`."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to lint")
    parser.add_argument(
        "--reference",
        action="append",
        metavar="LIB",
        help="reference library (or directory) for the collision rule; repeatable "
        "(default: torch's libraries from the installed wheel)",
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the collision rule (SK003)"
    )
    parser.add_argument(
        "--provider",
        action="append",
        default=[],
        metavar="LIB",
        help="library that defines prefixed shims (SK004 closure); repeatable",
    )
    parser.add_argument("--blob", action="store_true", help="treat every input as an AOTI blob")
    parser.add_argument(
        "--own",
        action="append",
        default=[],
        metavar="PATTERN",
        help="fnmatch pattern of our own libraries (default: every non-blob input)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the reference cache"
    )
    parser.add_argument(
        "--no-follow-symlinks", action="store_true", help="do not follow symbolic links"
    )


def lint_options(args: argparse.Namespace, *, progress: bool) -> LintOptions:
    if args.no_reference and args.reference:
        raise ShimkitError("--reference and --no-reference exclude each other")
    references: list[str] | None = [] if args.no_reference else args.reference
    return LintOptions(
        paths=args.paths,
        references=references,
        providers=args.provider,
        force_blob=args.blob,
        own_patterns=args.own,
        use_cache=not args.no_cache,
        follow_symlinks=not args.no_follow_symlinks,
        progress=ProgressBar.for_tty(progress),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lint_options(parser)
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", metavar="FILE", help="write the report here (default: stdout)")
    parser.add_argument("--no-color", action="store_true", help="never colour text output")
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="print nothing when everything is clean"
    )
    parser.add_argument(
        "--suppressions",
        metavar="FILE",
        help="TOML or JSON suppressions (as for `shimkit gate`); expired ones set exit bit 32",
    )
    parser.add_argument(
        "--source-root",
        metavar="DIR",
        type=Path,
        help="SARIF: the repository root relative URIs start from (%%SRCROOT%%; default: the "
        "working directory)",
    )
    parser.add_argument(
        "--help-uri-base",
        metavar="URL",
        help=f"SARIF: where the docs folder lives, for rule help links (default: {DOCS_URL})",
    )


def apply_suppression_file(result: LintResult, path: str, root: Path, today: dt.date) -> None:
    """Drop the findings live suppressions cover; record expired suppressions."""
    suppressions = load_suppressions(Path(path))
    pairs = [(f, relative_location(f.location, root)) for f in result.findings]
    applied = apply_suppressions(pairs, suppressions, today)
    kept = {id(f) for f in applied.kept}
    for artifact in result.artifacts:
        artifact.findings = [f for f in artifact.findings if id(f) in kept]
    result.suppressed = len(applied.suppressed)
    result.expired = [f"{s.describe()} has expired" for s in applied.expired]


def use_color(args: argparse.Namespace) -> bool:
    if args.no_color or args.output or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def write_report(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    write_atomically(output, text)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    options = lint_options(args, progress=not args.quiet)
    try:
        result = run_lint(config, options)
    finally:
        if options.progress is not None:
            options.progress.close()
    if args.suppressions:
        today = dt.datetime.now(dt.timezone.utc).date()
        apply_suppression_file(result, args.suppressions, args.source_root or Path.cwd(), today)
    sarif = SarifOptions(
        source_root=args.source_root or Path.cwd(), docs_url=args.help_uri_base or DOCS_URL
    )
    text = render(result, config, args.format, color=use_color(args), quiet=args.quiet, sarif=sarif)
    write_report(text, args.output)
    if args.output and args.format != "text" and not args.quiet:
        # the report went to a file: still say the verdict on stderr
        sys.stderr.write(render(result, config, "text", quiet=True) or "")
    return result.exit_code()
