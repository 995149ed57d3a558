"""`shimkit probe`: show where a blob's shim imports bind, with libtorch in the process."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shimkit.config import load_config
from shimkit.exitcodes import EXIT_UNPREFIXED

HELP = (
    "load libtorch globally, then load a blob through the slim runtime and show every shim "
    "import bound to the slim shims (an unprefixed blob: rejected, and shown binding to libtorch)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("blob", type=Path, help="a .pt2 package or a blob .so")
    parser.add_argument(
        "--no-libtorch", action="store_true", help="do not load libtorch first (not the worst case)"
    )
    parser.add_argument(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="cpu, cuda or cuda:N (default auto: cuda for a blob built for CUDA, else cpu)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from shimkit.runtime.probe import probe

    report = probe(args.blob, config=config, with_libtorch=not args.no_libtorch, device=args.device)
    code = 0 if report.ok else EXIT_UNPREFIXED
    if args.format == "json":
        print(json.dumps(report.as_dict(), indent=2))
        return code
    print(f"blob:     {report.blob}")
    print(f"device:   {report.device}")
    print(f"provider: {report.provider}")
    print(f"libtorch: {report.libtorch or '(not loaded)'}")
    if report.libtorch_cuda:
        print(f"          {report.libtorch_cuda}")
    if report.lint_errors:
        print(f"REJECTED by the linter before loading ({len(report.lint_errors)} errors):")
        for line in report.lint_errors[:5]:
            print(f"  {line}")
        if report.bindings:
            print("negative control: opened raw next to libtorch (child process), it binds:")
    else:
        print("loaded through the slim runtime; resolved imports:")
    for b in report.bindings:
        where = (
            "slim shims"
            if b.library == report.provider
            else ("LIBTORCH" if b in report.to_libtorch else (b.library or "unresolved"))
        )
        print(f"  {b.symbol:60s} -> {where}")
    print(
        f"summary: {len(report.to_provider)}/{len(report.bindings)} shim imports bound to the slim "
        f"shims, {len(report.to_libtorch)} to libtorch"
        + ("; ran once on zero inputs" if report.ran else "")
    )
    print("PASS" if report.ok else "FAIL")
    return code
