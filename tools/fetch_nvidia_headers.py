#!/usr/bin/env python3
"""Fetch NVIDIA's public headers (cuDNN, cuBLAS/cuBLASLt) from PyPI.

The CUDA shims dlopen NVIDIA's libraries and declare the functions they use
themselves (shims/cuda/*_api.h); tests/cuda checks those declarations against
the official headers at compile time. Those headers ship only inside NVIDIA's
wheels (hundreds of MB each), so this reads just the header members of each
pinned wheel with HTTP range requests (about 1 MB in all) and checks each
file's SHA-256 against tools/nvidia_headers.lock before writing it. All
headers go into one include directory.

    python3 tools/fetch_nvidia_headers.py [OUT_DIR]   # default build/nvidia-headers

Prints the include directory (OUT_DIR/include). Idempotent: files already
present with the locked hashes are not fetched again. Standard library only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "tools" / "nvidia_headers.lock"
DEFAULT_OUT = ROOT / "build" / "nvidia-headers"
TIMEOUT_S = 60


class FetchError(Exception):
    pass


@dataclass(frozen=True)
class Package:
    """One locked wheel and the headers read out of it."""

    name: str
    version: str
    url: str
    wheel_sha256: str
    member_dir: str
    files: dict[str, str]  # header name -> SHA-256

    @classmethod
    def from_lock(cls, entry: Any, where: str) -> Package:
        if not isinstance(entry, dict):
            raise FetchError(f"{where}: a package must be an object")
        values: dict[str, Any] = {}
        for key in ("name", "version", "url", "wheel_sha256", "member_dir"):
            value = entry.get(key)
            if not isinstance(value, str) or not value:
                raise FetchError(f"{where}: {key!r} must be a non-empty string")
            values[key] = value
        files = entry.get("files")
        if (
            not isinstance(files, dict)
            or not files
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        ):
            raise FetchError(f"{where}: 'files' must map header names to SHA-256 strings")
        for name in files:
            if not name or "/" in name or "\\" in name or name in (".", ".."):
                raise FetchError(f"{where}: {name!r} is not a plain file name")
        return cls(files=dict(files), **values)


def load_lock(lock: Path = LOCK) -> list[Package]:
    """The packages of `lock`; FetchError if it is unreadable or malformed."""
    try:
        data = json.loads(lock.read_text())
    except (OSError, ValueError) as exc:
        raise FetchError(f"{lock}: {exc}") from exc
    entries = data.get("packages") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise FetchError(f"{lock}: 'packages' must be a non-empty list")
    packages = [Package.from_lock(e, f"{lock} packages[{i}]") for i, e in enumerate(entries)]
    owner: dict[str, str] = {}
    for package in packages:
        for name in package.files:
            if name in owner:
                raise FetchError(
                    f"{lock}: {name} is locked by both {owner[name]} and {package.name}"
                )
            owner[name] = package.name
    return packages


class RangeReader(io.RawIOBase):
    """A seekable, read-only file over an HTTP URL, one range request per read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise FetchError(f"{url}: no Content-Length in the HEAD response")
        self.size = int(length)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.size - self.pos
        if size == 0 or self.pos >= self.size:
            return b""
        end = min(self.pos + size, self.size) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            if response.status != 206:
                raise FetchError(
                    f"{self.url}: server ignored the range request (HTTP {response.status})"
                )
            data: bytes = response.read()
        if len(data) != end - self.pos + 1:
            raise FetchError(f"{self.url}: asked for bytes {self.pos}-{end}, got {len(data)} bytes")
        self.pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def missing_files(package: Package, include: Path) -> list[str]:
    """The package's headers not yet in `include` with their locked hashes."""
    return [
        name
        for name, digest in package.files.items()
        if not (include / name).is_file() or sha256((include / name).read_bytes()) != digest
    ]


def write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def fetch_package(package: Package, names: list[str], include: Path, lock_name: str) -> None:
    """Reads `names` out of the package's wheel into `include`, checking each hash."""
    try:
        with zipfile.ZipFile(io.BufferedReader(RangeReader(package.url), 1 << 16)) as wheel:
            for name in names:
                member = f"{package.member_dir}/{name}"
                try:
                    data = wheel.read(member)
                except KeyError:
                    raise FetchError(f"{package.url}: no member {member} in the wheel") from None
                digest = sha256(data)
                if digest != package.files[name]:
                    raise FetchError(
                        f"{package.url}: {member} has SHA-256 {digest}, "
                        f"{lock_name} says {package.files[name]}"
                    )
                write_atomically(include / name, data)
    except (OSError, zipfile.BadZipFile) as exc:  # urllib.error.URLError is an OSError
        raise FetchError(f"{package.url}: {exc}") from exc


def fetch(
    out: Path = DEFAULT_OUT, lock: Path = LOCK, progress: Callable[[str], None] | None = None
) -> Path:
    """Makes `out`/include hold every locked header; returns that directory.

    `progress`, if given, is told about each wheel read from the network."""
    include = out / "include"
    for package in load_lock(lock):
        names = missing_files(package, include)
        if names:
            if progress is not None:
                progress(f"reading {len(names)} header(s) out of {package.name} {package.version}")
            include.mkdir(parents=True, exist_ok=True)
            fetch_package(package, names, include, lock.name)
    return include


def say(line: str) -> None:
    print(f"fetch_nvidia_headers: {line}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: fetch_nvidia_headers.py [OUT_DIR]", file=sys.stderr)
        return 2
    out = Path(argv[0]) if argv else DEFAULT_OUT
    try:
        print(fetch(out, progress=say))
    except FetchError as exc:
        say(str(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
