"""The slim shims called directly: semantics that blobs rely on, against torch."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.runtime.shimcall import Shims

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config) -> Shims:
    return Shims(shims, config)


def _ints(*values: int) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


def test_only_prefixed_shims_are_exported(libs, config) -> None:
    from shimkit.elf import read_elf  # the linter's reader

    image = read_elf(libs.shims.read_bytes(), str(libs.shims))
    names = [s.name for s in image.exports]
    shim_names = [n for n in names if config.is_prefixed_family(n)]
    assert len(shim_names) >= 60
    assert not [n for n in names if config.is_family(n)]
    assert not [n for n in names if n.startswith("_ZN7shimkit")], "C++ internals leak"


def test_reinterpret_offset_is_an_increment(sh: Shims) -> None:
    base = np.arange(24, dtype=np.float32)
    t = sh.wrap(base[4:], offset=4)
    assert sh.geometry(t)[2] == 4
    view = ctypes.c_void_p()
    sh.ok(
        "aoti_torch__reinterpret_tensor",
        t,
        ctypes.c_int64(2),
        _ints(2, 3),
        _ints(3, 1),
        ctypes.c_int64(5),
        ctypes.byref(view),
    )
    assert sh.geometry(view) == ([2, 3], [3, 1], 9)
    np.testing.assert_array_equal(sh.read(view), base[9:15].reshape(2, 3))
    sh.free(view)
    sh.free(t)


def test_view_past_storage_is_rejected(sh: Shims) -> None:
    t = sh.wrap(np.zeros(6, np.float32))
    view = ctypes.c_void_p()
    rc = sh.call(
        "aoti_torch__reinterpret_tensor",
        t,
        ctypes.c_int64(1),
        _ints(7),
        _ints(1),
        ctypes.c_int64(0),
        ctypes.byref(view),
    )
    assert rc == 1 and "storage has 24" in sh.error()
    sh.free(t)


def test_clone_keeps_storage_separate(sh: Shims) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = sh.wrap(a.T)  # non-contiguous
    c = ctypes.c_void_p()
    sh.ok("aoti_torch_clone", t, ctypes.byref(c))
    a[0, 0] = 100
    np.testing.assert_array_equal(sh.read(c), np.arange(6, dtype=np.float32).reshape(2, 3).T)
    sh.free(c)
    sh.free(t)


@pytest.mark.parametrize(
    ("device_type", "index", "ok"),
    [(0, -1, True), (0, 0, True), (0, 1, False), (1, -1, False), (99, 0, False), (-3, 0, False)],
)
def test_device_metadata_is_validated(sh: Shims, device_type: int, index: int, ok: bool) -> None:
    out = ctypes.c_void_p()
    rc = sh.call(
        "aoti_torch_empty_strided",
        ctypes.c_int64(1),
        _ints(4),
        _ints(1),
        ctypes.c_int32(6),
        ctypes.c_int32(device_type),
        ctypes.c_int32(index),
        ctypes.byref(out),
    )
    assert (rc == 0) == ok, sh.error()
    if ok:
        sh.free(out)
    else:
        assert sh.error()  # a message, not a crash


def test_errors_are_codes_not_exceptions(sh: Shims) -> None:
    out = ctypes.c_int64()
    assert sh.call("aoti_torch_get_dim", None, ctypes.byref(out)) == 1
    assert "null tensor handle" in sh.error()
    assert (
        sh.call(
            "aoti_torch_get_size",
            sh.wrap(np.zeros(3, np.float32)),
            ctypes.c_int64(5),
            ctypes.byref(out),
        )
        == 1
    )


@pytest.mark.parametrize("transpose", [(False, False), (True, False), (False, True), (True, True)])
def test_addmm_matches_torch(sh: Shims, transpose: tuple[bool, bool]) -> None:
    rng = np.random.default_rng(0)
    m1 = rng.standard_normal((5, 7), dtype=np.float32)
    m2 = rng.standard_normal((7, 3), dtype=np.float32)
    a = np.ascontiguousarray(m1.T).T if transpose[0] else m1
    b = np.ascontiguousarray(m2.T).T if transpose[1] else m2
    bias = rng.standard_normal(3, dtype=np.float32)
    out = np.zeros((5, 3), np.float32)
    _addmm(sh, out, bias, a, b, beta=0.5, alpha=2.0)
    want = torch.addmm(
        torch.from_numpy(bias), torch.from_numpy(m1), torch.from_numpy(m2), beta=0.5, alpha=2.0
    )
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)


def test_bmm_matches_torch(sh: Shims) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 5), dtype=np.float32)
    b = rng.standard_normal((3, 5, 2), dtype=np.float32)
    out = np.zeros((3, 4, 2), np.float32)
    sh.ok("aoti_torch_cpu_bmm_out", sh.wrap(out), sh.wrap(a), sh.wrap(b))
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


# m, k, n of GEMMs big enough (>= 1e6 flops, kOnednnMinFlops in shim_ops_cpu.cpp) for
# oneDNN's matmul, and of ones that stay on OpenBLAS; a single row as big, which BLAS's
# GEMV takes (gemv_product in shim_ops_cpu.cpp).
BIG_GEMM = (24, 80, 272)
SMALL_GEMM = (5, 7, 3)
ROW_GEMM = (1, 1024, 1024)


@pytest.mark.parametrize("shape", [(1, 7, 3), (5, 7, 1), (1, 7, 1), (1, 300, 200), (200, 300, 1)])
@pytest.mark.parametrize("layout", ["dense", "transposed", "padded"])
def test_products_with_one_row_or_column_match_torch(
    sh: Shims, shape: tuple[int, int, int], layout: str
) -> None:
    """One row (a Linear layer at batch 1) or one column: BLAS's GEMV, with each operand
    dense, transposed (a Linear's weight as it is passed) or a view of wider rows, alpha
    and beta, float32 and float64."""
    m, k, n = shape
    rng = np.random.default_rng(m * 7 + n)
    for dtype in (np.float32, np.float64):
        m1 = rng.standard_normal((m, k)).astype(dtype)
        m2 = rng.standard_normal((k, n)).astype(dtype)
        if layout == "transposed":
            a, b = np.ascontiguousarray(m1.T).T, np.ascontiguousarray(m2.T).T
        elif layout == "padded":
            a = np.pad(m1, ((0, 0), (0, 3)))[:, :k]
            b = np.pad(m2, ((0, 0), (0, 2)))[:, :n]
        else:
            a, b = m1, m2
        bias = rng.standard_normal(n).astype(dtype)
        out = np.zeros((m, n), dtype)
        _addmm(sh, out, bias, a, b, beta=0.5, alpha=2.0)
        want = torch.addmm(
            torch.from_numpy(bias), torch.from_numpy(m1), torch.from_numpy(m2), beta=0.5, alpha=2.0
        )
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, want.numpy(), rtol=tol, atol=tol * np.sqrt(k))


def _addmm(
    sh: Shims,
    out: np.ndarray,
    bias: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    beta: float = 1.0,
    alpha: float = 1.0,
) -> None:
    sh.ok(
        "aoti_torch_cpu_addmm_out",
        sh.wrap(out),
        sh.wrap(bias),
        sh.wrap(a),
        sh.wrap(b),
        ctypes.c_double(beta),
        ctypes.c_double(alpha),
    )


def _bias(kind: str, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    shapes = {"1d": (n,), "row": (1, n), "col": (m, 1), "full": (m, n), "scalar": ()}
    if kind == "expanded":  # a [m, n] view with stride 0 along rows
        return np.broadcast_to(rng.standard_normal(n, dtype=np.float32), (m, n))
    if kind == "padded":  # a [m, n] view of wider rows
        return rng.standard_normal((m, n + 5), dtype=np.float32)[:, :n]
    return np.asarray(rng.standard_normal(shapes[kind], dtype=np.float32))


@pytest.mark.parametrize("bias_kind", ["1d", "row", "col", "full", "scalar", "expanded", "padded"])
@pytest.mark.parametrize("transpose", [(False, False), (True, False), (False, True), (True, True)])
def test_large_addmm_matches_torch(sh: Shims, transpose: tuple[bool, bool], bias_kind: str) -> None:
    """The oneDNN path (fused bias, operands read in place with their strides)."""
    m, k, n = BIG_GEMM
    rng = np.random.default_rng(2)
    m1 = rng.standard_normal((m, k), dtype=np.float32)
    m2 = rng.standard_normal((k, n), dtype=np.float32)
    a = np.ascontiguousarray(m1.T).T if transpose[0] else m1
    b = np.ascontiguousarray(m2.T).T if transpose[1] else m2
    bias = _bias(bias_kind, m, n, rng)
    out = np.full((m, n), np.nan, np.float32)
    _addmm(sh, out, bias, a, b)
    want = torch.addmm(torch.from_numpy(np.array(bias)), torch.from_numpy(m1), torch.from_numpy(m2))
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-4, atol=1e-4)


def test_large_addmm_strided_rows_and_scalars(sh: Shims) -> None:
    """Row strides wider than a row (views of wider arrays, out too), beta 0 ignoring
    a NaN self, alpha and beta other than 1 (the BLAS path), and self that is out."""
    m, k, n = BIG_GEMM
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k + 3), dtype=np.float32)[:, :k]
    b = rng.standard_normal((k, n + 7), dtype=np.float32)[:, :n]
    bias = rng.standard_normal(n, dtype=np.float32)
    ta, tb, tbias = (torch.from_numpy(np.array(x)) for x in (a, b, bias))
    wide = np.zeros((m, n + 4), np.float32)
    out = wide[:, :n]
    _addmm(sh, out, bias, a, b)
    np.testing.assert_allclose(out, torch.addmm(tbias, ta, tb).numpy(), rtol=1e-4, atol=1e-4)
    assert not wide[:, n:].any(), "wrote past the rows of out"

    out = np.zeros((m, n), np.float32)
    _addmm(sh, out, np.full(n, np.nan, np.float32), a, b, beta=0.0)
    np.testing.assert_allclose(out, (ta @ tb).numpy(), rtol=1e-4, atol=1e-4)

    _addmm(sh, out, bias, a, b, beta=0.5, alpha=2.0)
    want = torch.addmm(tbias, ta, tb, beta=0.5, alpha=2.0)
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-4, atol=1e-4)

    # In place: out = out + a @ b (self is out, read while it is written).
    start = rng.standard_normal((m, n), dtype=np.float32)
    out = start.copy()
    handle = sh.wrap(out)
    sh.ok(
        "aoti_torch_cpu_addmm_out",
        handle,
        handle,
        sh.wrap(a),
        sh.wrap(b),
        ctypes.c_double(1.0),
        ctypes.c_double(1.0),
    )
    want = torch.addmm(torch.from_numpy(start), ta, tb)
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-4, atol=1e-4)


def test_large_mm_matches_torch(sh: Shims) -> None:
    m, k, n = BIG_GEMM
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = np.ascontiguousarray(rng.standard_normal((n, k), dtype=np.float32)).T
    out = np.zeros((m, n), np.float32)
    sh.ok("aoti_torch_cpu_mm_out", sh.wrap(out), sh.wrap(a), sh.wrap(b))
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    bad = np.zeros((k + 1, n), np.float32)  # negative control: mismatched shapes refused
    assert sh.call("aoti_torch_cpu_mm_out", sh.wrap(out), sh.wrap(a), sh.wrap(bad)) != 0
    assert "gemm shape mismatch" in sh.error()


_WHICH_GEMM_LIBRARY = """
import ctypes, sys
import numpy as np
from shimkit.config import load_config
from tests.runtime.shimcall import Shims
from tests.runtime.test_shims import BIG_GEMM, ROW_GEMM, SMALL_GEMM, _addmm

def dnnl_loaded():
    return any("libdnnl" in line for line in open("/proc/self/maps"))

sh = Shims(ctypes.CDLL(sys.argv[1]), load_config())
if sys.argv[2:] == ["gemm-off"]:  # what the runtime does for a model that does not convolve
    assert sh.lib.shimkit_shim_set_onednn_gemm(0) == 1  # the previous setting: on
seen = []
for m, k, n in (SMALL_GEMM, ROW_GEMM, BIG_GEMM):
    a = np.ones((m, k), np.float32)
    b = np.ones((k, n), np.float32)
    out = np.zeros((m, n), np.float32)
    _addmm(sh, out, np.ones(n, np.float32), a, b)
    assert (out == k + 1).all()
    seen.append(dnnl_loaded())
print(seen)
"""


@pytest.mark.parametrize(
    ("switch", "setting", "want"),
    [
        (None, None, "[False, False, True]"),
        ("0", None, "[False, False, False]"),
        (None, "gemm-off", "[False, False, False]"),
    ],
)
def test_only_large_gemms_load_onednn(
    libs, switch: str | None, setting: str | None, want: str
) -> None:
    """A fresh process: a small addmm leaves oneDNN unloaded (OpenBLAS), as does a
    single row as large (BLAS's GEMV), a large one opens it (the control for the
    others); with SHIMKIT_ONEDNN=0, or with the
    thread's GEMMs kept off oneDNN (shimkit_shim_set_onednn_gemm(0), as the runtime
    runs a model that does not convolve), nothing does and the result holds."""
    env = {k: v for k, v in os.environ.items() if k != "SHIMKIT_ONEDNN"}
    if switch is not None:
        env["SHIMKIT_ONEDNN"] = switch
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _WHICH_GEMM_LIBRARY,
            str(libs.shims),
            *([setting] if setting else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == want


# A blob's buffers, in the order the transformer block's run asks for and frees them
# (KiB; ("free", i) frees the round's i-th buffer).
_BUFFER_ROUND: list[int | tuple[str, int]] = [128, 256, 128, ("free", 0), 128, ("free", 1)]
_BUFFER_ROUND += [512, ("free", 2), 128, ("free", 4), ("free", 5), ("free", 3)]

# Runs the round 50 times, each buffer from the shims (empty_strided, delete) or, the
# control, from aligned_alloc(64, n) as the shims used to; prints how much more the heap
# and malloc's own mappings hold at the end than before (KiB). In C: a Python host's
# heap, warmed by its imports, would hide what a fresh process shows.
_HELD_BY_BUFFERS = r"""
#include <dlfcn.h>
#include <malloc.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
using Empty = int32_t (*)(int64_t, const int64_t*, const int64_t*, int32_t, int32_t, int32_t,
                          void**);
using Delete = int32_t (*)(void*);
static size_t held() {
  const struct mallinfo2 info = mallinfo2();
  return info.arena + info.hblkhd;
}
int main(int argc, char** argv) {  // shims empty_strided delete_tensor_object mode round...
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == nullptr) return 2;
  const auto empty = reinterpret_cast<Empty>(dlsym(lib, argv[2]));
  const auto destroy = reinterpret_cast<Delete>(dlsym(lib, argv[3]));
  const bool control = std::strcmp(argv[4], "aligned_alloc") == 0;
  if (empty == nullptr || destroy == nullptr) return 3;
  const size_t before = held();
  for (int round = 0; round < 50; ++round) {
    std::vector<void*> blocks;
    for (int i = 5; i < argc; ++i) {
      if (argv[i][0] == 'f') {  // "f<i>": free the i-th buffer
        void* b = blocks[std::atoi(argv[i] + 1)];
        if (control) std::free(b); else if (destroy(b) != 0) return 4;
        continue;
      }
      const int64_t floats = std::atoll(argv[i]) * 256, stride = 1;
      void* b = nullptr;
      if (control) b = std::aligned_alloc(64, floats * 4);
      else if (empty(1, &floats, &stride, 6, 0, -1, &b) != 0) return 5;
      blocks.push_back(b);
    }
  }
  std::printf("%zu\n", (held() - before) >> 10);
  return 0;
}
"""


def _live_peak_kib(round_: list[int | tuple[str, int]]) -> int:
    live = peak = 0
    sizes: list[int] = []
    for step in round_:
        if isinstance(step, tuple):
            live -= sizes[step[1]]
        else:
            sizes.append(step)
            live += step
        peak = max(peak, live)
    return peak


@pytest.fixture(scope="module")
def buffer_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("buffers")
    (folder / "driver.cpp").write_text(_HELD_BY_BUFFERS)
    exe = folder / "driver"
    cmd = ["g++", "-std=c++17", "-O1", "-o", str(exe), str(folder / "driver.cpp"), "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True)
    return exe


@pytest.mark.parametrize("allocator", ["shims", "aligned_alloc"])
def test_freed_buffers_serve_the_next_run(
    libs, config, buffer_driver: Path, allocator: str
) -> None:
    """Tensors a blob frees serve its next run's requests of the same size: after 50
    runs of the transformer block's buffer pattern a fresh process's heap holds at most
    twice the most that was live at once (768 KiB; measured: 1120 KiB from the second
    run on). The control allocates as the shims used to, with aligned_alloc(64, n),
    whose freed blocks never serve the next aligned request of their size: the heap
    grows run after run (to ~4 MiB), and the bound sees it."""
    steps = [f"f{s[1]}" if isinstance(s, tuple) else str(s) for s in _BUFFER_ROUND]
    names = [
        config.prefixed(n) for n in ("aoti_torch_empty_strided", "aoti_torch_delete_tensor_object")
    ]
    proc = subprocess.run(
        [str(buffer_driver), str(libs.shims), *names, allocator, *steps],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    grown_kib = int(proc.stdout)
    bound_kib = 2 * _live_peak_kib(_BUFFER_ROUND)
    assert (grown_kib <= bound_kib) == (allocator == "shims"), (grown_kib, bound_kib)


def _conv(
    sh: Shims,
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    stride: int,
    padding: int,
    dilation: int,
    groups: int,
) -> tuple[np.ndarray, list[int]]:
    bias_handle = sh.wrap(b.numpy()) if b is not None else None
    bias_ptr = ctypes.byref(bias_handle) if bias_handle is not None else None
    spatial = x.dim() - 2
    out = ctypes.c_void_p()
    sh.ok(
        "aoti_torch_cpu_convolution",
        sh.wrap(x.numpy()),
        sh.wrap(w.numpy()),
        bias_ptr,
        _ints(*[stride] * spatial),
        ctypes.c_int64(spatial),
        _ints(*[padding] * spatial),
        ctypes.c_int64(spatial),
        _ints(*[dilation] * spatial),
        ctypes.c_int64(spatial),
        ctypes.c_int32(0),
        _ints(*[0] * spatial),
        ctypes.c_int64(spatial),
        ctypes.c_int64(groups),
        ctypes.byref(out),
    )
    result, strides = sh.read(out), sh.geometry(out)[1]
    sh.free(out)
    return result, strides


@pytest.mark.parametrize("x_cl", [False, True])
@pytest.mark.parametrize("w_cl", [False, True])
@pytest.mark.parametrize(
    ("stride", "padding", "dilation", "groups"),
    [(1, 1, 1, 1), (2, 0, 1, 1), (1, 2, 2, 2), (1, 1, 1, 4)],
)
def test_conv2d_matches_torch_values_and_strides(
    sh: Shims, x_cl: bool, w_cl: bool, stride: int, padding: int, dilation: int, groups: int
) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 4, 9, 8)
    w = torch.randn(8, 4 // groups, 3, 3)
    b = torch.randn(8)
    if x_cl:
        x = x.contiguous(memory_format=torch.channels_last)
    if w_cl:
        w = w.contiguous(memory_format=torch.channels_last)
    want = torch.ops.aten.convolution(
        x, w, b, [stride] * 2, [padding] * 2, [dilation] * 2, False, [0, 0], groups
    )
    got, strides = _conv(sh, x, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    assert strides == list(want.stride()), "output memory format differs from ATen's"


def test_conv1d_without_bias(sh: Shims) -> None:
    torch.manual_seed(1)
    x, w = torch.randn(2, 3, 10), torch.randn(4, 3, 3)
    want = torch.nn.functional.conv1d(x, w, None, stride=2, padding=1)
    got, _ = _conv(sh, x, w, None, 2, 1, 1, 1)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch(sh: Shims, largest: bool) -> None:
    torch.manual_seed(2)
    x = torch.randn(4, 9)
    x[1, 3] = float("nan")
    values, indices = ctypes.c_void_p(), ctypes.c_void_p()
    sh.ok(
        "aoti_torch_cpu_topk",
        sh.wrap(x.numpy()),
        ctypes.c_int64(3),
        ctypes.c_int64(-1),
        ctypes.c_int32(int(largest)),
        ctypes.c_int32(1),
        ctypes.byref(values),
        ctypes.byref(indices),
    )
    want = torch.topk(x, 3, dim=-1, largest=largest)
    np.testing.assert_array_equal(sh.read(values), want.values.numpy())
    np.testing.assert_array_equal(sh.read(indices), want.indices.numpy())


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_stable_sort_matches_torch(sh: Shims, descending: bool, dim: int) -> None:
    x = torch.tensor([[3.0, 1.0, 3.0, 2.0], [1.0, 1.0, 0.0, 5.0], [2.0, 3.0, 3.0, 1.0]])
    values, indices = ctypes.c_void_p(), ctypes.c_void_p()
    stable = ctypes.c_int32(1)
    sh.ok(
        "aoti_torch_cpu_sort_stable",
        sh.wrap(x.numpy()),
        ctypes.byref(stable),
        ctypes.c_int64(dim),
        ctypes.c_int32(int(descending)),
        ctypes.byref(values),
        ctypes.byref(indices),
    )
    want = torch.sort(x, dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(sh.read(values), want.values.numpy())
    np.testing.assert_array_equal(sh.read(indices), want.indices.numpy())


def test_copy_converts_dtype_and_strides(sh: Shims) -> None:
    src = np.arange(12, dtype=np.int64).reshape(3, 4).T
    dst = np.zeros((4, 3), np.float32)
    sh.ok("aoti_torch_copy_", sh.wrap(dst), sh.wrap(src), ctypes.c_int32(0))
    np.testing.assert_array_equal(dst, src.astype(np.float32))
