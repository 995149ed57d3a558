"""Read blob bytes (and what the inputs must look like) from a .pt2 or a .so, and what the
CPU and CUDA models share: the device a blob was built for, inputs as checked host arrays."""

from __future__ import annotations

import contextlib
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from shimkit.elf import ELF_MAGIC
from shimkit.errors import ShimkitError
from shimkit.inputs.kinds import pt2_blob_names
from shimkit.inputs.zipc import ZipMemberError, read_member
from shimkit.runtime.capi import numpy_dtype
from shimkit.runtime.stand_ins import stand_in_constants

_EXTERNAL_WEIGHTS = ("/data/weights/", "/data/constants/")


@dataclass(frozen=True)
class InputSpec:
    """Expected dtype (numpy name) and sizes of one input; None = not fixed. `order`: the
    dims from outermost to innermost in memory where the blob was compiled for a layout
    other than row-major (a channels-last example input), else None. `ranges`: (dim, at
    least, at most) of each dynamic dim the blob bounds (torch.export's range for it)."""

    dtype: str | None
    shape: tuple[int | None, ...] | None
    order: tuple[int, ...] | None = None
    ranges: tuple[tuple[int, int | None, int | None], ...] = ()


@dataclass(frozen=True)
class BlobSource:
    """The blob's bytes, where they came from, and input specs if known."""

    path: Path
    member: str | None
    data: bytes
    inputs: tuple[InputSpec, ...] | None = field(default=None)
    # Constants (original FQNs) the blob's code reads only through shim calls: a
    # shim's packed copy may stand in for their bytes (shimkit.runtime.stand_ins).
    stand_ins: tuple[str, ...] = field(default=())

    def without_bytes(self) -> BlobSource:
        """The same record without the blob's bytes: what a loaded model keeps. The
        runtime holds the blob from then on (its memory file); keeping the bytes too
        would hold the weights once more for the model's lifetime."""
        return replace(self, data=b"")


# Inductor's generated input checks (wrapper .cpp, check_input_N functions).
_CHECK_FN = re.compile(
    r"static void check_input_(\d+)\(\s*AtenTensorHandle\* input_handles\s*\)"
    r"\s*\{(.*?)\n\}",
    re.S,
)
_DTYPE = re.compile(r"_expected_dtype = aoti_torch_dtype_(\w+)\(\);")
_FIXED_DIM = re.compile(r"if \((\d+) != \w+_size\[(\d+)\]\)")
_ANY_DIM = re.compile(r"\w+_size\[(\d+)\]")
_DIM_BOUND = re.compile(r"if \(\w+_size\[(\d+)\] ([<>]) (\d+)\)")


# The wrapper's names for its inputs, and the strides it checks them against.
_INPUT_NAME = re.compile(r'inputs_info_\[(\d+)\]\.name = "(\w+)";')
_INPUT_STRIDES = re.compile(r'assert_size_stride\((\w+), \{[^}]*\}, \{([^}]*)\}, "input"\)')


def _memory_order(strides: str) -> tuple[int, ...] | None:
    """The dims outermost first for a stride list of the wrapper's (`2592L, 1L, ...`);
    None when it is row-major or not all numbers (dynamic sizes)."""
    values = [v.strip().rstrip("L") for v in strides.split(",") if v.strip()]
    if not all(v.isdigit() for v in values):
        return None
    numbers = [int(v) for v in values]
    order = tuple(sorted(range(len(numbers)), key=lambda d: (-numbers[d], d)))
    return None if order == tuple(range(len(numbers))) else order


def _input_orders(source: str) -> dict[int, tuple[int, ...]]:
    """Input index -> memory order, for the inputs compiled for a non-row-major layout."""
    strides = dict(_INPUT_STRIDES.findall(source))
    orders = {}
    for index, name in _INPUT_NAME.findall(source):
        order = _memory_order(strides[name]) if name in strides else None
        if order is not None:
            orders[int(index)] = order
    return orders


def dense_strides(shape: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of `shape` laid out densely with its dims in memory `order`
    (outermost first)."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def is_dense_in(shape: tuple[int, ...], strides: tuple[int, ...], order: tuple[int, ...]) -> bool:
    """Whether element `strides` lay `shape` out densely in memory `order` (dims of size 1
    may have any stride)."""
    want = dense_strides(shape, order)
    return all(
        size == 1 or got == expected
        for size, got, expected in zip(shape, strides, want, strict=True)
    )


def dense_in_order(array: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """`array` laid out densely with its dims in memory `order` (outermost first): the
    array itself if it already is, else a copy."""
    strides = tuple(s // array.itemsize for s in array.strides)
    if all(s % array.itemsize == 0 for s in array.strides) and is_dense_in(
        array.shape, strides, order
    ):
        return array
    out = np.empty([array.shape[d] for d in order], dtype=array.dtype)
    laid_out = out.transpose(np.argsort(order))
    laid_out[...] = array
    return laid_out


def _input_specs(source: str) -> tuple[InputSpec, ...] | None:
    orders = _input_orders(source)
    specs: dict[int, InputSpec] = {}
    for match in _CHECK_FN.finditer(source):
        body = match.group(2)
        dtype = _DTYPE.search(body)
        dims = [int(d) for d in _ANY_DIM.findall(body)]
        shape: list[int | None] = [None] * (max(dims) + 1 if dims else 0)
        for value, index in _FIXED_DIM.findall(body):
            shape[int(index)] = int(value)
        ranges: dict[int, tuple[int | None, int | None]] = {}
        for dim, sign, bound in _DIM_BOUND.findall(body):
            low, high = ranges.get(int(dim), (None, None))
            if sign == "<":  # `size < 2` fails: at least 2
                low = int(bound)
            else:
                high = int(bound)
            ranges[int(dim)] = (low, high)
        name = dtype.group(1) if dtype else None
        index = int(match.group(1))
        specs[index] = InputSpec(
            dtype=name or None,
            shape=tuple(shape) if dims else None,
            order=orders.get(index) if dims and len(orders.get(index, ())) == len(shape) else None,
            ranges=tuple((dim, low, high) for dim, (low, high) in sorted(ranges.items())),
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
        blobs = pt2_blob_names(names)
        if len(blobs) != 1:
            found = ", ".join(blobs) or "none"
            raise ShimkitError(f"{path}: expected exactly one AOTInductor blob .so, found {found}")
        member = blobs[0]
        specs = None
        stand_ins: tuple[str, ...] = ()
        wrapper = [
            n
            for n in names
            if n.startswith(member.rsplit("/", 1)[0]) and n.endswith(".wrapper.cpp")
        ]
        try:
            # The linter's container limits: a zip bomb is refused before it inflates.
            data = read_member(archive, archive.getinfo(member))
            if len(wrapper) == 1:
                source = read_member(archive, archive.getinfo(wrapper[0])).decode(
                    "utf-8", "replace"
                )
                specs = _input_specs(source)
                stand_ins = stand_in_constants(source)
        except ZipMemberError as exc:
            raise ShimkitError(f"{path}!{exc.member}: {exc.message}") from None
    return BlobSource(path=path, member=member, data=data, inputs=specs, stand_ins=stand_ins)


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


def as_array(value: Any, index: int, any_device: bool = False) -> np.ndarray:
    """A numpy view of a numpy array or a CPU torch tensor (no copy if dense); with
    `any_device`, a tensor on another device is copied to the host (the CUDA runtime
    uploads host arrays), else it is refused in one line."""
    if isinstance(value, np.ndarray):
        return value
    if value is None:
        raise ShimkitError(f"input {index}: got None, expected an array or a CPU tensor")
    device = getattr(value, "device", None)
    if device is not None and hasattr(value, "numpy"):
        tensor = value.detach()
        if getattr(device, "type", "cpu") != "cpu":
            if not any_device:
                raise ShimkitError(
                    f"input {index}: tensor is on {device}, and this model runs on the slim "
                    "CPU runtime (a CUDA blob loads with device='cuda')"
                )
            tensor = tensor.cpu()
        if str(tensor.dtype) == "torch.bfloat16":  # torch's .numpy() refuses it: same bits
            import torch

            return tensor.view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
        return tensor.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ShimkitError(f"input {index}: not an array: {exc}") from None
    if array.dtype.kind not in "biufc":  # objects, strings, bytes, records, dates
        raise ShimkitError(f"input {index}: a {type(value).__name__} is not an array of numbers")
    return array


def check_input_spec(dtype: str, shape: tuple[int, ...], spec: InputSpec, index: int) -> None:
    """One-line error unless an input of `dtype` (a DTYPE_CODES name) and `shape` has the
    dtype and sizes the blob recorded."""
    if spec.dtype is not None and dtype != spec.dtype:
        raise ShimkitError(f"input {index}: expected dtype {spec.dtype}, got {dtype}")
    if spec.shape is not None:
        shape_ok = len(spec.shape) == len(shape) and all(
            want is None or want == got for want, got in zip(spec.shape, shape, strict=True)
        )
        if not shape_ok:
            want = "[" + ", ".join("?" if d is None else str(d) for d in spec.shape) + "]"
            raise ShimkitError(f"input {index}: expected shape {want}, got {list(shape)}")
    for dim, low, high in spec.ranges:
        size = shape[dim] if dim < len(shape) else None
        too_small = size is not None and low is not None and size < low
        too_large = size is not None and high is not None and size > high
        if too_small or too_large:
            span = f"{low if low is not None else 0} to {high if high is not None else 'any'}"
            why = (
                "torch.export compiles a dynamic dim for sizes of 2 and more; sizes 0 and 1 "
                "need a package of their own"
                if too_small and low == 2
                else "the range torch.export gave that dynamic dim; export with a wider Dim"
            )
            raise ShimkitError(
                f"input {index}: size {size} at dim {dim}, where the package takes {span} ({why})"
            )


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


def built_for_cuda(import_names: Sequence[str]) -> bool:
    """True when a blob's imports show it was built for CUDA: a CUDA shim (`*_cuda_*`) or
    the CUDA runtime/driver (`cuda*`, `cuXxx`); the runner applies the same rule."""
    return any(
        "_cuda_" in name
        or name.startswith("cuda")
        or (len(name) > 2 and name.startswith("cu") and name[2].isupper())
        for name in import_names
    )


def blob_device(path: str | Path) -> str:
    """ "cuda" when the blob at `path` (.pt2 or .so) was built for CUDA (its imports say
    so), else "cpu" (also when it cannot be read: loading it then says why)."""
    from shimkit.elf import ElfFormatError, read_elf

    source = read_blob(path)
    try:
        image = read_elf(source.data, str(source.path))
    except ElfFormatError:
        return "cpu"
    return "cuda" if built_for_cuda([s.name for s in image.imports]) else "cpu"
