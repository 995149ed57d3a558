"""How an artifact's role (blob, own library, other) is decided.

A file is a blob when any of these holds: `--blob` was given; its name ends in
`.wrapper.so`; it sits under `data/aotinductor/` inside a container (a .pt2);
or it exports `AOTInductorModelContainer*` entry points. Every other artifact
is one of our own libraries, unless `--own PATTERN` was given: then only the
artifacts whose location matches a pattern (fnmatch, on the full location or
the file name) are own libraries and the rest are "other".
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from shimkit.checks.model import LintContext, Role
from shimkit.inputs.kinds import in_pt2_blob_dir

if TYPE_CHECKING:
    from shimkit.elf import ElfImage

BLOB_SUFFIX = ".wrapper.so"
ENTRY_POINT_PREFIX = "AOTInductorModelContainer"
CONTAINER_SEPARATOR = "!"


def inner_name(location: str) -> str:
    """The innermost member name of a location like `a.pt2!data/x.so`."""
    return location.rsplit(CONTAINER_SEPARATOR, 1)[-1]


def basename(location: str) -> str:
    return inner_name(location).rsplit("/", 1)[-1]


def looks_like_blob(image: ElfImage) -> bool:
    location = image.location
    if basename(location).endswith(BLOB_SUFFIX):
        return True
    if CONTAINER_SEPARATOR in location:
        member = inner_name(location)
        if in_pt2_blob_dir(member) and not member.startswith("elf@"):
            return True
    return any(s.name.startswith(ENTRY_POINT_PREFIX) for s in image.exports)


def role_of(image: ElfImage, context: LintContext) -> Role:
    cached = context.role_cache.get(image.location)
    if cached is not None:
        return cached
    if context.force_blob or looks_like_blob(image):
        role = Role.BLOB
    elif not context.own_patterns:
        role = Role.OWN
    else:
        names = (image.location, basename(image.location))
        matched = any(
            fnmatch.fnmatchcase(name, pattern) for pattern in context.own_patterns for name in names
        )
        role = Role.OWN if matched else Role.OTHER
    context.role_cache[image.location] = role
    return role
