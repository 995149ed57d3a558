"""`shimkit header`: generate (or check) the rename header from torch's C shim headers, or
(`--families`) the C++ blob loader's shim family list from the prefix file."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from shimkit.config import load_config
from shimkit.errors import ShimkitError
from shimkit.exitcodes import EXIT_BASELINE_DRIFT
from shimkit.fileio import write_atomically
from shimkit.header import find_torch, render_families_header, render_rename_header, shim_names
from shimkit.header.torchdir import torch_include_version

HELP = (
    "generate shims/aoti_shim_rename.h from the installed torch's C shim headers, or "
    "runtime/shim_families.h from the prefix file (--families); --check: diff"
)
DEFAULT_OUTPUT = Path("shims") / "aoti_shim_rename.h"
FAMILIES_OUTPUT = Path("runtime") / "shim_families.h"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        help=f"where to write the header (default: {DEFAULT_OUTPUT}, or {FAMILIES_OUTPUT} with "
        "--families, beside rules/)",
    )
    parser.add_argument(
        "--families",
        action="store_true",
        help="the shim family list of the C++ blob loader (SHIM_SYMBOL_FAMILIES), not the "
        "rename header",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; print a unified diff and exit nonzero if the file is out of date",
    )
    parser.add_argument(
        "--torch-include",
        metavar="DIR",
        help="a torch include directory to read instead of the installed torch's",
    )


def expected_header(args: argparse.Namespace) -> str:
    config = load_config(args.config)
    if args.families:
        return render_families_header(config.families, config.source.name)
    if args.torch_include:
        include = Path(args.torch_include)
        if not include.is_dir():
            raise ShimkitError(f"{include}: --torch-include is not a directory")
        version = torch_include_version(include)
    else:
        torch = find_torch()
        include, version = torch.include_dir, torch.version
    return render_rename_header(shim_names(include), config.define, version)


def default_output(args: argparse.Namespace) -> Path:
    config = load_config(args.config)
    return config.source.parent.parent / (FAMILIES_OUTPUT if args.families else DEFAULT_OUTPUT)


def regenerate_command(args: argparse.Namespace, output: Path) -> str:
    return f"shimkit header{' --families' if args.families else ''} --output {output}"


def run(args: argparse.Namespace) -> int:
    output = Path(args.output) if args.output else default_output(args)
    text = expected_header(args)
    if args.check:
        try:
            current = output.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        except OSError as exc:
            raise ShimkitError(f"{output}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            print(
                f"shimkit: {output} is not UTF-8 text, so not the generated header; "
                f"regenerate it with `{regenerate_command(args, output)}`",
                file=sys.stderr,
            )
            return EXIT_BASELINE_DRIFT
        if current == text:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"{output} (checked in)",
            tofile=f"{output} (generated)",
        )
        sys.stdout.writelines(diff)
        print(
            f"shimkit: {output} is out of date; regenerate it with "
            f"`{regenerate_command(args, output)}`",
            file=sys.stderr,
        )
        return EXIT_BASELINE_DRIFT
    write_atomically(output, text)
    print(f"wrote {output}", file=sys.stderr)
    return 0
