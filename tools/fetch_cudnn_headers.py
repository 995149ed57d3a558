#!/usr/bin/env python3
"""Fetch cuDNN's public headers (cudnn.h and what it includes) from PyPI.

The CUDA shims dlopen cuDNN and declare its functions themselves
(shims/cuda/cudnn_api.h); tests/cuda checks those declarations against the
official headers at compile time. The headers ship only inside NVIDIA's
cuDNN wheel (~700 MB), so this reads just the header members of the pinned
wheel with HTTP range requests (~300 kB) and checks each file's SHA-256
against tools/cudnn_headers.lock before writing it.

    python3 tools/fetch_cudnn_headers.py [OUT_DIR]   # default build/cudnn-headers

Prints the include directory. Idempotent: files already present with the
locked hashes are not fetched again. Standard library only.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "tools" / "cudnn_headers.lock"
DEFAULT_OUT = ROOT / "build" / "cudnn-headers"
TIMEOUT_S = 60


class FetchError(Exception):
    pass


class RangeReader(io.RawIOBase):
    """A seekable, read-only file over an HTTP URL, one range request per read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            self.size = int(response.headers["Content-Length"])

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
                raise FetchError(f"{self.url}: server ignored the range request")
            data: bytes = response.read()
        self.pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(out: Path = DEFAULT_OUT) -> Path:
    lock = json.loads(LOCK.read_text())
    include = out / "include"
    files: dict[str, str] = lock["files"]
    missing = [
        name
        for name, digest in files.items()
        if not (include / name).is_file() or sha256((include / name).read_bytes()) != digest
    ]
    if not missing:
        return include
    include.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(io.BufferedReader(RangeReader(lock["url"]), 1 << 16)) as wheel:
            for name in missing:
                data = wheel.read(f"{lock['member_dir']}/{name}")
                if sha256(data) != files[name]:
                    raise FetchError(f"{name}: SHA-256 differs from {LOCK.name}")
                (include / name).write_bytes(data)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise FetchError(f"{lock['url']}: {exc}") from exc
    return include


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    try:
        print(fetch(out))
    except FetchError as exc:
        print(f"fetch_cudnn_headers: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
