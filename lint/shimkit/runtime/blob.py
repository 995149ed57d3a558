"""Read blob bytes (and what the inputs must look like) from a .pt2 or a .so."""

from __future__ import annotations

import contextlib
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from shimkit.elf import ELF_MAGIC
from shimkit.errors import ShimkitError
from shimkit.inputs.kinds import is_pt2_blob
from shimkit.inputs.zipc import ZipMemberError, read_member

_EXTERNAL_WEIGHTS = ("/data/weights/", "/data/constants/")


@dataclass(frozen=True)
class InputSpec:
    """Expected dtype (numpy name) and sizes of one input; None = not fixed."""

    dtype: str | None
    shape: tuple[int | None, ...] | None


@dataclass(frozen=True)
class BlobSource:
    """The blob's bytes, where they came from, and input specs if known."""

    path: Path
    member: str | None
    data: bytes
    inputs: tuple[InputSpec, ...] | None = field(default=None)


# Inductor's generated input checks (wrapper .cpp, check_input_N functions).
_CHECK_FN = re.compile(
    r"static void check_input_(\d+)\(\s*AtenTensorHandle\* input_handles\s*\)"
    r"\s*\{(.*?)\n\}",
    re.S,
)
_DTYPE = re.compile(r"_expected_dtype = aoti_torch_dtype_(\w+)\(\);")
_FIXED_DIM = re.compile(r"if \((\d+) != \w+_size\[(\d+)\]\)")
_ANY_DIM = re.compile(r"\w+_size\[(\d+)\]")
_NUMPY_NAMES = {"bool": "bool", "bfloat16": None}


def _input_specs(source: str) -> tuple[InputSpec, ...] | None:
    specs: dict[int, InputSpec] = {}
    for match in _CHECK_FN.finditer(source):
        body = match.group(2)
        dtype = _DTYPE.search(body)
        dims = [int(d) for d in _ANY_DIM.findall(body)]
        shape: list[int | None] = [None] * (max(dims) + 1 if dims else 0)
        for value, index in _FIXED_DIM.findall(body):
            shape[int(index)] = int(value)
        name = dtype.group(1) if dtype else None
        specs[int(match.group(1))] = InputSpec(
            dtype=_NUMPY_NAMES.get(name, name) if name else None,
            shape=tuple(shape) if dims else None,
        )
    if not specs or sorted(specs) != list(range(len(specs))):
        return None
    return tuple(specs[i] for i in range(len(specs)))


def _from_pt2(path: Path) -> BlobSource:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ShimkitError(f"{path}: not a .pt2 archive: {exc}") from None
    with archive:
        names = archive.namelist()
        external = [n for n in names if any(w in n for w in _EXTERNAL_WEIGHTS)]
        if external:
            raise ShimkitError(
                f"{path}: weights stored outside the blob ({external[0]}) are not supported; "
                "package constants in the .so (Inductor's default)"
            )
        blobs = [n for n in names if is_pt2_blob(n)]
        if len(blobs) != 1:
            found = ", ".join(blobs) or "none"
            raise ShimkitError(f"{path}: expected exactly one AOTInductor blob .so, found {found}")
        member = blobs[0]
        specs = None
        wrapper = [
            n
            for n in names
            if n.startswith(member.rsplit("/", 1)[0]) and n.endswith(".wrapper.cpp")
        ]
        try:
            # The linter's container limits: a zip bomb is refused before it inflates.
            data = read_member(archive, archive.getinfo(member))
            if len(wrapper) == 1:
                source = read_member(archive, archive.getinfo(wrapper[0]))
                specs = _input_specs(source.decode("utf-8", "replace"))
        except ZipMemberError as exc:
            raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    return BlobSource(path=path, member=member, data=data, inputs=specs)


def read_blob(path: str | Path) -> BlobSource:
    """Blob bytes from a `.pt2` package or a blob `.so` (checked to be ELF)."""
    path = Path(path)
    try:
        head = path.open("rb").read(4)
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read: {exc.strerror}") from None
    if head.startswith(b"PK"):
        source = _from_pt2(path)
    elif head == ELF_MAGIC:
        source = BlobSource(path=path, member=None, data=path.read_bytes())
    else:
        raise ShimkitError(f"{path}: neither a .pt2 archive nor an ELF blob")
    if not source.data.startswith(ELF_MAGIC):
        where = f"{path}:{source.member}" if source.member else str(path)
        raise ShimkitError(f"{where}: blob is not an ELF file")
    return source


_Loaded = TypeVar("_Loaded", bound="LoadedBlob")


class LoadedBlob:
    """What a loaded model shares, CPU or CUDA: where it came from, for messages, and
    closing it (explicitly, on leaving a `with` block, or when it is collected)."""

    source: BlobSource

    def _where(self) -> str:
        src = self.source
        return f"{src.path}:{src.member}" if src.member else str(src.path)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Loaded) -> _Loaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing to do
            self.close()


def blob_device(path: str | Path) -> str:
    """ "cuda" when the blob at `path` (.pt2 or .so) was built for CUDA (its imports say
    so), else "cpu" (also when it cannot be read: loading it then says why)."""
    from shimkit.elf import ElfFormatError, read_elf
    from shimkit.runtime.cuda import built_for_cuda

    source = read_blob(path)
    try:
        image = read_elf(source.data, str(source.path))
    except ElfFormatError:
        return "cpu"
    return "cuda" if built_for_cuda([s.name for s in image.imports]) else "cpu"
