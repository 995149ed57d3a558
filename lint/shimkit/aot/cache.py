"""Content-addressed directories under the cache root for generated helper files
(wrappers, libraries)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from shimkit.cache import CACHE_ENV, cache_root
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically


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
