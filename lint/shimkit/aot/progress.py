"""Progress on stderr while a long step (a torch compile) runs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

SPINNER = "|/-\\"


@contextmanager
def progress(label: str, stream: TextIO | None = None, interval: float = 0.25) -> Iterator[None]:
    """Show `label` with elapsed seconds until the block ends.

    On a terminal the line is redrawn in place with a spinner; otherwise one
    line is printed every 10 seconds, so logs stay readable.
    """
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
                out.write(f"\r{SPINNER[frame % len(SPINNER)]} {label} {elapsed:5.1f}s")
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
        prefix = "\r" if tty else ""
        out.write(f"{prefix}{label}: {status} in {elapsed:.1f}s\n")
        out.flush()
