"""`shimkit config`: print the effective shim ABI configuration."""

from __future__ import annotations

import argparse
import json

from shimkit.config import load_config

HELP = "print the prefix, define, flags and symbol families from rules/shim_symbol_prefix.bzl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.format == "json":
        print(json.dumps(config.as_dict(), indent=2, sort_keys=True))
        return 0
    print(f"source:   {config.source}")
    print(f"prefix:   {config.prefix}")
    print(f"define:   {config.define}")
    print(f"families: {' '.join(config.families)}")
    print(f"defines:  {' '.join(config.defines)}")
    print(f"flags:    {' '.join(config.flags)}")
    return 0
