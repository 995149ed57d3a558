"""A progress bar on stderr for long scans: only on a tty, never in logs."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """One stderr line, redrawn at most every `min_interval` s once `delay` s have passed."""

    def __init__(
        self, stream: TextIO | None = None, *, min_interval: float = 0.1, delay: float = 0.5
    ) -> None:
        self.stream = stream or sys.stderr
        self.min_interval = min_interval
        self._start = time.monotonic()
        self.delay = delay  # short scans never show a bar
        self._last = 0.0
        self._drawn = False
        self.count = 0

    @classmethod
    def for_tty(cls, enabled: bool = True) -> ProgressBar | None:
        stream = sys.stderr
        return cls(stream) if enabled and stream.isatty() else None

    def __call__(self, done: int, total: int) -> None:
        """Called by the input walker after each file: `done` of `total`."""
        self.count = done
        now = time.monotonic()
        if now - self._start < self.delay:
            return
        if now - self._last < self.min_interval and done != total:
            return
        self._last = now
        width = 30
        filled = width * done // total if total > 0 else 0
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r\033[2Kshimkit: [{bar}] {done}/{total} files")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\033[2K")
            self.stream.flush()
            self._drawn = False
