"""A read-only, seekable stream over a buffer (bytes, memoryview or mmap) without copying it.

zipfile (and pyelftools, in tests) read through a file-like object;
io.BytesIO would copy a memoryview (hundreds of MB for a wheel holding
libtorch), this does not.
"""

from __future__ import annotations

import io


class BufferStream(io.RawIOBase):
    def __init__(self, data: bytes | memoryview) -> None:
        super().__init__()
        self._view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = len(self._view) + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else self._pos + size
        chunk = bytes(self._view[self._pos : end])
        self._pos += len(chunk)
        return chunk

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        if isinstance(self._view, memoryview):
            self._view.release()
        super().close()
