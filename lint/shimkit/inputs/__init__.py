"""Finding ELF images wherever they hide: files, directories, `ar` archives, zip
containers (.pt2, .whl) and blobs with embedded ELF images (.pte).

Every image's `location` names its place: `out/lib.so`, `libx.a!foo.o`,
`model.pt2!data/aotinductor/model/x.wrapper.so`, `m.pte!elf@0x1a000`.
Bad input never raises: it comes back as an InputError and the scan goes on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from shimkit.elf import ElfImage, ElfNames, InputError, read_elf, read_elf_names
from shimkit.inputs.limits import DEFAULT_LIMITS, Limits
from shimkit.inputs.sources import scan
from shimkit.inputs.walk import SkippedInput

__all__ = ["DEFAULT_LIMITS", "Limits", "SkippedInput", "iter_images", "iter_names"]


def iter_images(
    paths: Sequence[str | os.PathLike[str]],
    *,
    follow_symlinks: bool = True,
    progress: Callable[[int, int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    name_prefixes: Sequence[str] | None = None,
) -> Iterator[ElfImage | InputError | SkippedInput]:
    """Every ELF image under `paths`, or an InputError per input that cannot be read.

    Non-ELF files given explicitly are errors; met while walking a directory
    they are skipped (except .pte/.ptd, which are scanned for embedded images).
    `progress(done, total)` is called after each file. `name_prefixes` is
    passed to read_elf (only symbols with those name prefixes are kept).
    """

    def reader(view: memoryview, location: str) -> ElfImage:
        return read_elf(view, location, name_prefixes=name_prefixes)

    return scan(paths, reader, follow_symlinks=follow_symlinks, progress=progress, limits=limits)


def iter_names(
    paths: Sequence[str | os.PathLike[str]],
    *,
    follow_symlinks: bool = True,
    progress: Callable[[int, int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Iterator[ElfNames | InputError | SkippedInput]:
    """Like iter_images, but names only (read_elf_names): the fast path of `shimkit symbols`."""
    return scan(
        paths, read_elf_names, follow_symlinks=follow_symlinks, progress=progress, limits=limits
    )
