"""Where shimkit caches what it generates or derives (wrappers, libraries, reference sets),
and the content-addressed folders and files it keeps there."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically

CACHE_ENV = "SHIMKIT_CACHE_DIR"


def cache_root() -> Path:
    """$SHIMKIT_CACHE_DIR, else $XDG_CACHE_HOME/shimkit, else ~/.cache/shimkit."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shimkit"


def content_dir(kind: str, *parts: str | bytes) -> Path:
    """A directory named by the hash of `parts`: same content, same path."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    directory = cache_root() / f"{kind}-{digest.hexdigest()[:16]}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShimkitError(
            f"{directory}: cannot create the cache folder: {exc.strerror}; "
            f"set ${CACHE_ENV} to a writable folder"
        ) from None
    return directory


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> Path:
    """Write `text` atomically unless `path` already holds exactly it."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    write_atomically(path, text, mode=mode)
    return path
