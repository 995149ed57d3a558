"""Where shimkit caches what it generates or derives (wrappers, libraries, reference sets)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "SHIMKIT_CACHE_DIR"


def cache_root() -> Path:
    """$SHIMKIT_CACHE_DIR, else $XDG_CACHE_HOME/shimkit, else ~/.cache/shimkit."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shimkit"
