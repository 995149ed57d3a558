"""A convolution's packed weights standing in for a constant's plain bytes.

Shim level: a constant the loader saw copied out of the blob, once the runtime allows it
(shimkit_shim_allow_stand_in), has its pages given back after the convolution packs it
(mincore shows them gone), convolves the same afterwards, and reads back exactly when a
shim asks for its bytes again. Controls: a constant not allowed, and a tensor that is
not a copied constant, keep their pages. Wrapper level: which constants
`shimkit.runtime.stand_ins` lets stand in, on AOTInductor's own wrapper forms.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from shimkit.runtime.capi import DTYPE_CODES
from shimkit.runtime.stand_ins import stand_in_constants

from tests.runtime.shimcall import Shims
from tests.runtime.test_shims import _ints

PAGE = mmap.PAGESIZE
CONSUMED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)
_libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config) -> Shims:
    shims.shimkit_shim_watch_constants.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        CONSUMED,
        ctypes.c_void_p,
    ]
    shims.shimkit_shim_allow_stand_in.argtypes = [ctypes.c_void_p]
    return Shims(shims, config)


def resident_pages(array: np.ndarray) -> int:
    """How many of the pages wholly inside `array` are resident (mincore)."""
    begin = -(-array.ctypes.data // PAGE) * PAGE
    end = (array.ctypes.data + array.nbytes) // PAGE * PAGE
    count = (end - begin) // PAGE
    flags = (ctypes.c_ubyte * count)()
    assert _libc.mincore(ctypes.c_void_p(begin), ctypes.c_size_t(end - begin), flags) == 0
    return sum(f & 1 for f in flags)


@contextlib.contextmanager
def copied_out(
    sh: Shims,
    weights: list[np.ndarray],
    view: Callable[[np.ndarray], np.ndarray] = lambda stored: stored,
) -> Iterator[list[tuple[np.ndarray, ctypes.c_void_p]]]:
    """`weights` (their stored layout) made as the loader's watch sees AOTInductor make
    constants: copied, in order, out of a section into anonymous memory the model owns;
    each handed to the shims as `view` of its copy."""
    section = np.concatenate([w.ravel() for w in weights])
    memory = mmap.mmap(-1, section.nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    owned = np.frombuffer(memory, dtype=np.float32)
    owned[:] = section
    consumed = CONSUMED(lambda _context, _n: None)  # referenced while the watch is on
    sh.lib.shimkit_shim_watch_constants(section.ctypes.data, section.nbytes, consumed, None)
    made = []
    try:
        start = 0
        for w in weights:
            plain = view(owned[start : start + w.size].reshape(w.shape))
            made.append((plain, sh.wrap(plain)))
            start += w.size
    finally:
        sh.lib.shimkit_shim_unwatch_constants()
    yield made
    for _, handle in made:
        sh.free(handle)


@pytest.fixture
def constants(sh: Shims) -> Iterator[list[tuple[np.ndarray, ctypes.c_void_p]]]:
    """Two 64x64x3x3 convolution weights, copied out as constants."""
    torch.manual_seed(3)
    with copied_out(sh, [torch.randn(64, 64, 3, 3).numpy() for _ in range(2)]) as made:
        yield made


def _convolve(sh: Shims, handle: ctypes.c_void_p, x: np.ndarray) -> np.ndarray:
    out = ctypes.c_void_p()
    sh.ok(
        "aoti_torch_cpu_convolution",
        sh.wrap(x),
        handle,
        None,
        _ints(1, 1),
        ctypes.c_int64(2),
        _ints(1, 1),
        ctypes.c_int64(2),
        _ints(1, 1),
        ctypes.c_int64(2),
        ctypes.c_int32(0),
        _ints(0, 0),
        ctypes.c_int64(2),
        ctypes.c_int64(1),
        ctypes.byref(out),
    )
    result = sh.read(out)
    sh.free(out)
    return result


def test_packed_weights_stand_in_and_plain_bytes_come_back(sh: Shims, constants) -> None:
    (allowed, allowed_handle), (kept, kept_handle) = constants
    original = [allowed.copy(), kept.copy()]
    assert sh.lib.shimkit_shim_allow_stand_in(allowed_handle) == 1
    x = torch.randn(1, 64, 28, 28)
    want = [torch.nn.functional.conv2d(x, torch.from_numpy(w), padding=1).numpy() for w in original]
    for _ in range(2):  # packs, then runs on the packed copy alone
        got = [_convolve(sh, h, x.numpy()) for h in (allowed_handle, kept_handle)]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        assert resident_pages(allowed) == 0  # given back
        assert resident_pages(kept) > 0  # control: not allowed, kept
    # A shim asking for the bytes gets them rebuilt from the packed copy.
    np.testing.assert_array_equal(sh.read(allowed_handle), original[0])
    assert resident_pages(allowed) > 0
    np.testing.assert_allclose(_convolve(sh, allowed_handle, x.numpy()), want[0], atol=1e-4)


def _status_bytes(field: str) -> int:
    """A size from /proc/self/status (VmRSS, VmHWM), in bytes."""
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) * 1024


def _rss_bytes() -> int:
    return _status_bytes("VmRSS")


def _peak_growth_bytes(action: Callable[[], object]) -> int:
    """How far this process's peak RSS rose above its RSS while `action` ran."""
    Path("/proc/self/clear_refs").write_text("5")  # the peak restarts from the current RSS
    before = _status_bytes("VmHWM")
    action()
    return _status_bytes("VmHWM") - before


@pytest.mark.parametrize("outermost", [True, False], ids=["rows-outermost", "control-transposed"])
def test_big_weight_is_packed_without_a_second_copy(sh: Shims, outermost: bool) -> None:
    # ResNet-18's largest convolution weight (9 MiB). Packed slice by slice, its plain
    # pages go back as each slice is reordered: the packing never holds both copies.
    # Control: stored with dim 0 innermost, no slice of its rows is contiguous, so it is
    # packed whole and the peak rises by the whole packed copy before the pages go back.
    torch.manual_seed(5)
    weight = torch.randn(512, 512, 3, 3)
    stored = weight.numpy() if outermost else weight.permute(1, 0, 2, 3).contiguous().numpy()
    view = (lambda a: a) if outermost else (lambda a: a.transpose(1, 0, 2, 3))
    x = torch.randn(1, 512, 7, 7)
    want = torch.nn.functional.conv2d(x, weight, padding=1).numpy()
    # First the same convolution on a weight of the model's own (reordered per call,
    # never cached): the plan, oneDNN's kernels and threads are made then, outside the
    # measured packing.
    layout = view(stored)
    warm_up = ctypes.c_void_p()
    sh.ok(
        "aoti_torch_empty_strided",
        ctypes.c_int64(4),
        _ints(*layout.shape),
        _ints(*(st // layout.itemsize for st in layout.strides)),
        ctypes.c_int32(DTYPE_CODES["float32"]),
        ctypes.c_int32(0),
        ctypes.c_int32(0),
        ctypes.byref(warm_up),
    )
    _convolve(sh, warm_up, x.numpy())
    sh.free(warm_up)
    with copied_out(sh, [stored], view) as [(plain, handle)]:
        assert sh.lib.shimkit_shim_allow_stand_in(handle) == 1
        got: list[np.ndarray] = []
        growth = _peak_growth_bytes(lambda: got.append(_convolve(sh, handle, x.numpy())))
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-3)
        assert resident_pages(plain) == 0
        if outermost:
            assert growth < weight.numel() * 4 / 4, growth
        else:
            assert growth > weight.numel() * 4 * 0.9, growth
        np.testing.assert_allclose(_convolve(sh, handle, x.numpy()), want, rtol=1e-4, atol=1e-3)
        held = _rss_bytes()
    # The packed copy goes with the constant's storage (a closed model's weights).
    assert held - _rss_bytes() > weight.numel() * 4 * 0.9


def test_only_copied_constants_can_stand_in(sh: Shims) -> None:
    w = torch.randn(64, 64, 3, 3).numpy()
    handle = sh.wrap(w)  # borrowed, but not seen copied out of a blob
    assert sh.lib.shimkit_shim_allow_stand_in(handle) == 0
    _convolve(sh, handle, torch.randn(1, 64, 28, 28).numpy())
    assert resident_pages(w) > 0
    sh.free(handle)


# --- which constants the wrapper source lets stand in ---------------------------------

HEADER = """
    constants_info_[0].name = "w0";
    constants_info_[0].from_folded = false;
    constants_info_[0].original_fqn = "conv.weight";
    constants_info_[1].name = "w1";
    constants_info_[1].from_folded = false;
    constants_info_[1].original_fqn = "norm.weight";
    constants_info_[2].name = "w2";
    constants_info_[2].from_folded = true;
    constants_info_[2].original_fqn = "folded";
"""
DECLARE = """
    [[maybe_unused]] auto& w0 = constants_->at(0);
    [[maybe_unused]] auto& w1 = constants_->at(1);
    [[maybe_unused]] auto& w2 = constants_->at(2);
"""
# AOTInductor's forms (torch 2.11 CPU wrapper): a weight to the convolution shim, a
# bias as an optional handle, a constant a generated kernel reads by address.
CONV = (
    "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_convolution(buf0, w0, "
    "&temporary_reference(w2.get()), std::array<int64_t, 2>{1L, 1L}.cbegin(), 2, &buf1));\n"
)
KERNEL = (
    "cpp_fused_native_layer_norm_0((const float*)(buf1.data_ptr()), "
    "(const float*)(w1.data_ptr()));\n"
)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (CONV + KERNEL, ("conv.weight",)),  # w1 read by address; w2 folded
        (CONV.replace("w2.get()", "w1.get()"), ("conv.weight", "norm.weight")),
        # w1 only declared: nothing reads it. w0 copied, handed to something not a
        # shim, or read by address through a helper: not followed.
        (CONV + "auto copy = w0;\n", ("norm.weight",)),
        (CONV + "foo(w0, buf1);\n", ("norm.weight",)),
        (CONV + "void* p = get_data_ptr_wrapper(w0);\n", ("norm.weight",)),
        # A constant reached without a declaration: nothing stands in.
        (CONV + "x((const float*)(constants_->at(0).data_ptr()));\n", ()),
    ],
)
def test_wrapper_forms(body: str, want: tuple[str, ...]) -> None:
    assert stand_in_constants(HEADER + DECLARE + body) == want


def test_wrapper_name_must_match_its_declaration() -> None:
    # A declaration bound to another constant's index is not followed.
    swapped = DECLARE.replace("auto& w0 = constants_->at(0)", "auto& w0 = constants_->at(1)")
    assert "conv.weight" not in stand_in_constants(HEADER + swapped + CONV)
