"""The test runner of `shimkit_lint_test` (rules/lint_test.bzl).

Usage: lint_runner.py --expect-exit N -- SHIMKIT_ARGS...

Runs `shimkit SHIMKIT_ARGS` in-process with the shimkit sources from the
runfiles tree (declared inputs, never an installed copy) and passes when the
exit code equals N: 0 for a normal lint test, nonzero for a negative control.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys


def _runfiles_lint_dir() -> str:
    # rules/private/lint_runner.py -> <runfiles root>/lint; keep symlinks unresolved
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, os.pardir, os.pardir, "lint"))


def _drop_finders_serving_another_shimkit(lint_dir: str) -> None:
    """Remove import hooks that would serve `shimkit` from outside `lint_dir`.

    An editable install (scikit-build-core's redirecting finder on sys.meta_path) maps
    `shimkit.*` to the checkout it was installed from, ahead of sys.path; the runfiles'
    sources must win, or the test would lint with other code than it declares.
    """
    for finder in list(sys.meta_path):
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None or finder is importlib.machinery.PathFinder:
            continue
        try:
            spec = find_spec("shimkit", None)
        except Exception:  # a foreign finder's failure is not this test's concern
            continue
        origin = spec.origin if spec is not None else None
        if origin and not os.path.abspath(origin).startswith(lint_dir):
            sys.meta_path.remove(finder)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "--expect-exit" or argv[2] != "--":
        print("usage: lint_runner.py --expect-exit N -- SHIMKIT_ARGS...", file=sys.stderr)
        return 2
    expected = int(argv[1])
    sys.path.insert(0, _runfiles_lint_dir())
    _drop_finders_serving_another_shimkit(_runfiles_lint_dir())
    os.environ.setdefault("SHIMKIT_CACHE_DIR", os.environ.get("TEST_TMPDIR", "."))
    os.environ.pop("SHIMKIT_CONFIG", None)

    import shimkit
    from shimkit.cli import main as shimkit_main

    if not os.path.abspath(shimkit.__file__).startswith(_runfiles_lint_dir()):
        print(f"lint_runner: shimkit came from {shimkit.__file__}, not runfiles", file=sys.stderr)
        return 1
    code = shimkit_main(argv[3:])
    sys.stdout.flush()
    if code == expected:
        if expected:
            print(f"lint_runner: PASS (exit {code} as expected: this target must fail lint)")
        return 0
    print(f"lint_runner: FAIL: shimkit exited {code}, expected {expected}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
