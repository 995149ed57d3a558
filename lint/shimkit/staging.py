"""Names of the staging folders and temp files shimkit writes beside a target, and
whether the run that owns one is still alive.

A writer (shimkit.fileio) puts its temp file or staging folder next to the file it
replaces, named `.<target name>.shimkit-staging-<pid>-<random>`. SIGKILL cannot be
caught, so a killed run may leave one behind: directory walks and the gate recognise
it here and skip it (with a note), and the next write beside the same target removes
those whose owner is gone.

Only `os` is imported: the walks use this module on the `shimkit symbols` path, where
start-up time is measured against `nm`.
"""

from __future__ import annotations

import os

STAGING_MARKER = ".shimkit-staging-"


def staging_prefix(target_name: str) -> str:
    """The name prefix of this process's temp files and staging folders for `target_name`."""
    return f".{target_name}{STAGING_MARKER}{os.getpid()}-"


def parse_leftover(name: str) -> tuple[str, int] | None:
    """(target name, owner pid) if `name` is a staging folder or temp file of ours."""
    if not name.startswith("."):
        return None
    target, marker, rest = name[1:].rpartition(STAGING_MARKER)
    pid, dash, _random = rest.partition("-")
    if not marker or not dash or not (pid.isascii() and pid.isdigit()):
        return None
    return target, int(pid)


def leftover_owner(name: str) -> int | None:
    """The owner's pid if `name` is a staging folder or temp file of ours, else None."""
    parsed = parse_leftover(name)
    return parsed[1] if parsed else None


def owner_alive(pid: int) -> bool:
    """True if process `pid` exists (ours or, EPERM, someone else's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
