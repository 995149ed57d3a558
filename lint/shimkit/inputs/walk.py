"""Expanding the paths given on a command line into the files to read."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from shimkit.elf.model import InputError
from shimkit.fileio import leftover_owner, owner_alive


@dataclass(frozen=True)
class FileEntry:
    """A file to read."""

    path: str
    explicit: bool  # named on the command line (not met while walking a directory)


class SkippedInput:
    """Something met while walking that is deliberately not read, and why (a note, not an
    error): staging folders and temp files of a shimkit run that was killed."""

    __slots__ = ("location", "reason")

    def __init__(self, location: str, reason: str) -> None:
        self.location = location
        self.reason = reason

    def __repr__(self) -> str:
        return f"SkippedInput(location={self.location!r}, reason={self.reason!r})"


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        return "no such file or directory (or a dangling symlink)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def _leftover_reason(owner: int) -> str:
    state = "still running" if owner_alive(owner) else "killed or crashed"
    return (
        f"staging left by shimkit process {owner} ({state}), not linted; "
        "it is removed by the next write to the same file, or remove it by hand"
    )


def expand(
    paths: Sequence[str | os.PathLike[str]], *, follow_symlinks: bool = True
) -> Iterator[FileEntry | InputError | SkippedInput]:
    """Files to read, each once (by device and inode), in a deterministic order.

    Directories are walked recursively in sorted order; a directory reached a
    second time (a symlink cycle, or two arguments overlapping) is not walked
    again. Special files (FIFOs, devices, sockets) met while walking are
    skipped; named explicitly they are an error. A shimkit staging folder or temp
    file met while walking (left by a killed run) is skipped with a SkippedInput.
    """
    seen_files: set[tuple[int, int]] = set()
    seen_dirs: set[tuple[int, int]] = set()
    for raw in paths:
        path = os.fspath(raw)
        try:
            st = os.stat(path)
        except OSError as exc:
            yield InputError(path, _describe(exc))
            continue
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(path, st, seen_files, seen_dirs, follow_symlinks)
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key not in seen_files:
                seen_files.add(key)
                yield FileEntry(path, True)
        else:
            yield InputError(path, "not a regular file or directory")


def _walk(
    root: str,
    root_st: os.stat_result,
    seen_files: set[tuple[int, int]],
    seen_dirs: set[tuple[int, int]],
    follow: bool,
) -> Iterator[FileEntry | InputError | SkippedInput]:
    from pathlib import Path  # only when walking: start-up time of `shimkit symbols lib.so`

    stack: list[tuple[str, os.stat_result]] = [(root, root_st)]
    while stack:
        directory, dst = stack.pop()
        key = (dst.st_dev, dst.st_ino)
        if key in seen_dirs:
            continue  # a symlink cycle or an overlap: its files are already listed
        seen_dirs.add(key)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield InputError(directory, f"cannot list directory: {_describe(exc)}")
            continue
        subdirs: list[tuple[str, os.stat_result]] = []
        for entry in entries:
            path = str(Path(directory) / entry.name)
            owner = leftover_owner(entry.name)
            if owner is not None:
                yield SkippedInput(path, _leftover_reason(owner))
                continue
            try:
                is_link = entry.is_symlink()
                if is_link and not follow:
                    continue
                st = entry.stat(follow_symlinks=True)
            except OSError as exc:
                yield InputError(path, _describe(exc))
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((path, st))
            elif stat.S_ISREG(st.st_mode):
                fkey = (st.st_dev, st.st_ino)
                if fkey not in seen_files:
                    seen_files.add(fkey)
                    yield FileEntry(path, False)
        stack.extend(reversed(subdirs))  # depth-first, sorted
