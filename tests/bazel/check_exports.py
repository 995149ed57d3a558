#!/usr/bin/env python3
"""Bazel py_test: a shim shared library exports exactly the prefixed shims.

The library must export every expected shim under its prefixed name, no
other prefixed shim-family name, and no unprefixed shim-family name. The
control (same sources, no link_whole) must fail that same check, and for
the reason under test: every expected shim is missing from it. Symbols come
from `nm -D --defined-only`. Standard library only (runs under Bazel).
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def defined_dynamic_symbols(path: str) -> set[str]:
    out = subprocess.run(
        ["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True
    ).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2].split("@", 1)[0])
    return names


def problems(
    symbols: set[str], prefix: str, families: tuple[str, ...], expected: set[str]
) -> list[str]:
    """Every way `symbols` differs from exactly `prefix + expected`, one line each."""
    found: list[str] = []
    wanted = {prefix + name for name in expected}
    for name in sorted(wanted - symbols):
        found.append(f"missing: {name}")
    for name in sorted(symbols):
        if name.startswith(prefix) and name[len(prefix) :].startswith(families):
            if name not in wanted:
                found.append(f"unexpected prefixed shim: {name}")
        elif name.startswith(families):
            found.append(f"unprefixed shim exported: {name}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--families", required=True, help="comma-separated")
    parser.add_argument("--expect", required=True, help="comma-separated unprefixed names")
    parser.add_argument("--library", required=True)
    parser.add_argument("--control", required=True)
    args = parser.parse_args(argv)
    families = tuple(f for f in args.families.split(",") if f)
    expected = {n for n in args.expect.split(",") if n}
    if not args.prefix or not families or not expected:
        print("error: empty --prefix, --families or --expect", file=sys.stderr)
        return 2

    failed = False
    library = problems(defined_dynamic_symbols(args.library), args.prefix, families, expected)
    if library:
        failed = True
        print(f"FAIL {args.library}:")
        print("\n".join(f"  {line}" for line in library))
    else:
        print(f"ok   {args.library}: exports all {len(expected)} shims, all prefixed")

    control = problems(defined_dynamic_symbols(args.control), args.prefix, families, expected)
    missing_all = {f"missing: {args.prefix}{name}" for name in expected} <= set(control)
    if not missing_all:
        failed = True
        print(f"FAIL {args.control}: the control must lack every shim; the check reported:")
        print("\n".join(f"  {line}" for line in control) or "  (nothing)")
    else:
        print(f"ok   {args.control}: the same check fails as it must ({len(control)} problems)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
