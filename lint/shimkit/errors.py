"""Errors shimkit reports to users as one clear line, never as a traceback."""

from __future__ import annotations


class ShimkitError(Exception):
    """A user-facing failure: bad input, missing tool, unreadable file.

    The CLI prints `shimkit: error: <message>` and exits with the input/tool
    error bit. Messages must name the file or value at fault and what to do.
    """
