"""Writing outputs safely: refuse to clobber, write to a temp path, rename atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shimkit.errors import ShimkitError


def check_output(path: Path, overwrite: bool) -> None:
    """Refuse an existing output unless `overwrite`; refuse a directory always."""
    if path.is_dir():
        raise ShimkitError(f"{path}: output path is a directory")
    if path.exists() and not overwrite:
        raise ShimkitError(f"{path}: output exists; pass --force to replace it")
    if not path.parent.is_dir():
        raise ShimkitError(f"{path}: output directory {path.parent} does not exist")


@contextmanager
def staged_output(path: Path) -> Iterator[Path]:
    """Yield a temp path with the same file name, in a private dir beside `path`.

    When the block succeeds the temp file replaces `path` atomically (same
    filesystem); on any failure nothing is left behind. The file name is kept
    because a .pt2's root folder is named after it.
    """
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.shimkit-", dir=path.parent))
    try:
        temp = staging / path.name
        yield temp
        if not temp.is_file():
            raise ShimkitError(f"{path}: nothing was written")
        os.replace(temp, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
