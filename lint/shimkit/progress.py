"""Progress on stderr: a file-count bar for long scans and an elapsed-time line for a long
step (a torch compile). On a terminal one line is redrawn in place and erased at the
end; elsewhere (logs) the bar stays silent and the step prints a line every 10 s."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

SPINNER = "|/-\\"
_REDRAW = "\r\033[2K"  # back to the line's start, erase it


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
        self.stream.write(f"{_REDRAW}shimkit: [{bar}] {done}/{total} files")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write(_REDRAW)
            self.stream.flush()
            self._drawn = False


@contextmanager
def progress(label: str, stream: TextIO | None = None, interval: float = 0.25) -> Iterator[None]:
    """Show `label` with elapsed seconds until the block ends, then `done`/`failed`."""
    out = stream if stream is not None else sys.stderr
    tty = out.isatty()
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        frame = 0
        last_line = 0.0
        while not done.wait(interval if tty else 1.0):
            elapsed = time.monotonic() - start
            if tty:
                out.write(f"{_REDRAW}{SPINNER[frame % len(SPINNER)]} {label} {elapsed:5.1f}s")
                out.flush()
                frame += 1
            elif elapsed - last_line >= 10.0:
                out.write(f"{label} ... {elapsed:.0f}s\n")
                out.flush()
                last_line = elapsed

    if not tty:
        out.write(f"{label} ...\n")
        out.flush()
    thread = threading.Thread(target=tick, name="shimkit-progress", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        done.set()
        thread.join()
        elapsed = time.monotonic() - start
        status = "done" if ok else "failed"
        out.write(f"{_REDRAW if tty else ''}{label}: {status} in {elapsed:.1f}s\n")
        out.flush()
