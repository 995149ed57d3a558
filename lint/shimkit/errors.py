"""Errors shimkit reports to users as one clear line, never as a traceback."""

from __future__ import annotations

import signal


class ShimkitError(Exception):
    """A user-facing failure: bad input, missing tool, unreadable file.

    The CLI prints `shimkit: error: <message>` and exits with the input/tool
    error bit. Messages must name the file or value at fault and what to do.
    """


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (the CLI's handler raises it in the main thread). A
    BaseException, like KeyboardInterrupt, so `except Exception` does not swallow it
    and every `finally` (temp files, staging folders, compiler children) still runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
