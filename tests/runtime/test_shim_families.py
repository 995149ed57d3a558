"""The slim CPU shims of the real-model families, called directly, against ATen.

Attention, embedding bags, the LSTM layer, the check family, scatter/index_reduce,
scans, searches, sorts of every dtype, float16/bfloat16 GEMMs and convolutions, and the
oneDNN convolution's weight cache. Each op is compared with the ATen op Inductor would
have called in libtorch (same arguments, values, output sizes, strides and dtypes); the
error cases return AOTI_TORCH_FAILURE with a message that says what is wrong.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.runtime.shimcall import TORCH_CODES, Handle, TorchShims, ints, outs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def assert_same_tensor(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-5) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride(), f"strides {got.stride()} vs ATen's {want.stride()}"
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got, want, rtol=rtol, atol=rtol)
    else:
        assert torch.equal(got, want)


# --- attention ---------------------------------------------------------------------


def sdpa(
    sh: TorchShims,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
    scale: float | None = None,
    dropout: float = 0.0,
) -> tuple[int, list[Handle]]:
    mask_h = sh.tensor(mask) if mask is not None else None
    scale_c = ctypes.c_double(scale) if scale is not None else None
    ret = outs(2)
    rc = sh.call(
        "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu",
        sh.tensor(q),
        sh.tensor(k),
        sh.tensor(v),
        ctypes.c_double(dropout),
        ctypes.c_int32(int(causal)),
        ctypes.byref(mask_h) if mask_h is not None else None,
        ctypes.byref(scale_c) if scale_c is not None else None,
        *[ctypes.byref(r) for r in ret],
    )
    return rc, ret


@pytest.mark.parametrize(
    ("heads", "kv_heads", "q_len", "kv_len", "causal", "mask"),
    [
        (4, 4, 9, 9, False, None),
        (4, 4, 9, 9, True, None),
        (4, 4, 5, 12, True, None),  # causal with fewer queries: top-left aligned
        (4, 4, 70, 70, True, None),  # more than one block of query rows
        (2, 2, 40, 75, True, None),  # causal blocks with more keys than queries
        (2, 2, 70, 70, True, "float [B,H,L,S]"),  # a mask on causal blocks
        (2, 2, 300, 300, False, None),  # more than one non-causal block
        (8, 2, 9, 11, False, None),  # grouped-query attention
        (8, 2, 9, 9, True, None),
        (4, 4, 9, 11, False, "float [B,1,L,S]"),
        (4, 4, 9, 11, False, "float [L,S]"),
        (4, 4, 9, 11, True, "float [B,H,L,S]"),
    ],
)
def test_sdpa_matches_aten(
    sh: TorchShims,
    heads: int,
    kv_heads: int,
    q_len: int,
    kv_len: int,
    causal: bool,
    mask: str | None,
) -> None:
    torch.manual_seed(heads + q_len)
    b, e = 2, 16
    # q as Inductor hands it over: a [B, L, H, E] buffer seen as [B, H, L, E].
    q = torch.randn(b, q_len, heads, e).transpose(1, 2)
    k = torch.randn(b, kv_heads, kv_len, e)
    v = torch.randn(b, kv_len, kv_heads, e).transpose(1, 2)
    m = None
    if mask == "float [B,1,L,S]":
        m = torch.randn(b, 1, q_len, kv_len)
    elif mask == "float [L,S]":
        m = torch.randn(q_len, kv_len)
    elif mask == "float [B,H,L,S]":
        m = torch.randn(b, heads, q_len, kv_len)
    want_out, want_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, causal, attn_mask=m
    )
    rc, (out, lse) = sdpa(sh, q, k, v, m, causal)
    assert rc == 0, sh.error()
    got_out, got_lse = sh.torch(out), sh.torch(lse)
    assert_same_tensor(got_out, want_out, rtol=1e-5)
    assert got_lse.stride() == (q_len * heads, 1, heads)  # the meta function's layout
    torch.testing.assert_close(got_lse, want_lse, rtol=1e-5, atol=1e-5)


def test_sdpa_output_is_like_query_for_a_contiguous_query(sh: TorchShims) -> None:
    """Inductor's meta function makes the output empty_like(query): the blob reads it so."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    rc, (out, lse) = sdpa(sh, q, k, v, None, False)
    assert rc == 0, sh.error()
    got = sh.torch(out)
    sh.free(lse)
    assert got.stride() == q.stride()
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_sdpa_boolean_mask_and_scale(sh: TorchShims) -> None:
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 3, 6, 8) for _ in range(3))
    keep = torch.rand(2, 1, 6, 6) > 0.4
    keep[..., 0] = True
    rc, (out, lse) = sdpa(sh, q, k, v, keep, False, scale=0.3)
    assert rc == 0, sh.error()
    sh.free(lse)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3)
    torch.testing.assert_close(sh.torch(out), want, rtol=1e-5, atol=1e-5)


def test_sdpa_fully_masked_rows_are_zero_like_aten(sh: TorchShims) -> None:
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    m = torch.zeros(1, 1, 4, 4)
    m[0, 0, 1, :] = float("-inf")
    want, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=m)
    rc, (out, lse) = sdpa(sh, q, k, v, m, False)
    assert rc == 0, sh.error()
    sh.free(lse)
    got = sh.torch(out)
    assert torch.all(got[0, :, 1] == 0) and torch.all(want[0, :, 1] == 0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_sdpa_other_dtypes(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 4, 7, 8).to(dtype) for _ in range(3))
    want, want_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    rc, (out, lse) = sdpa(sh, q, k, v, None, True)
    assert rc == 0, sh.error()
    got, got_lse = sh.torch(out), sh.torch(lse)
    tol = {torch.float64: 1e-10, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    assert got.dtype == dtype and got_lse.dtype == want_lse.dtype
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    ("shapes", "kwargs", "message"),
    [
        (((1, 2, 4, 8), (1, 2, 4, 6), (1, 2, 4, 8)), {}, "head dims differ"),
        (((1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), {}, "not a multiple"),
        (((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), {"dropout": 0.1}, "dropout"),
        (((2, 4, 8), (2, 4, 8), (2, 4, 8)), {}, "must be 4-D"),
        (((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), {"mask": (3, 4)}, "does not broadcast"),
    ],
)
def test_sdpa_refuses_bad_arguments(
    sh: TorchShims, shapes: Sequence[tuple[int, ...]], kwargs: dict[str, Any], message: str
) -> None:
    q, k, v = (torch.randn(*s) for s in shapes)
    mask = torch.zeros(*kwargs["mask"]) if "mask" in kwargs else None
    rc, _ = sdpa(sh, q, k, v, mask, False, dropout=kwargs.get("dropout", 0.0))
    assert rc == 1 and message in sh.error(), sh.error()


# --- embedding bag -------------------------------------------------------------------


def embedding_bag(
    sh: TorchShims,
    weight: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    mode: int,
    psw: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
    forward_only: bool = False,
) -> tuple[int, list[Handle]]:
    psw_h = sh.tensor(psw) if psw is not None else None
    ret = outs(4)
    name = "aoti_torch_cpu__embedding_bag" + ("_forward_only" if forward_only else "")
    rc = sh.call(
        name,
        sh.tensor(weight),
        sh.tensor(indices),
        sh.tensor(offsets),
        ctypes.c_int32(0),
        ctypes.c_int64(mode),
        ctypes.c_int32(0),
        ctypes.byref(psw_h) if psw_h is not None else None,
        ctypes.c_int32(int(include_last_offset)),
        ctypes.c_int64(padding_idx),
        *[ctypes.byref(r) for r in ret],
    )
    return rc, ret


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize(
    "variant", ["plain", "weights", "last_offset", "padding", "int32", "empty_bag", "fwd_only"]
)
def test_embedding_bag_matches_aten(sh: TorchShims, mode: int, variant: str) -> None:
    if variant == "weights" and mode != 0:
        pytest.skip("per-sample weights exist for sum only")
    torch.manual_seed(mode)
    weight = torch.randn(10, 5)
    indices = torch.tensor([1, 4, 4, 9, 0, 2, 7, 3])
    offsets = torch.tensor([0, 3, 3 if variant == "empty_bag" else 5, 6])
    psw = torch.rand(8) if variant == "weights" else None
    last = variant == "last_offset"
    if last:
        offsets = torch.tensor([0, 3, 5, 8])
    padding = 4 if variant == "padding" else -1
    if variant == "int32":
        indices, offsets = indices.int(), offsets.int()
    fwd = variant == "fwd_only"
    op = torch.ops.aten._embedding_bag_forward_only if fwd else torch.ops.aten._embedding_bag
    want = op(weight, indices, offsets, False, mode, False, psw, last, padding)
    rc, ret = embedding_bag(sh, weight, indices, offsets, mode, psw, last, padding, fwd)
    assert rc == 0, sh.error()
    got = [sh.torch(h) for h in ret]
    torch.testing.assert_close(got[0], want[0], rtol=1e-6, atol=1e-6)
    for g, w in zip(got[1:], want[1:], strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype  # the meta function's results
    if mode == 2:
        assert torch.equal(got[3], want[3])  # max_indices


@pytest.mark.parametrize(
    ("indices", "offsets", "message"),
    [
        ([1, 10, 2], [0, 1], "out of range"),
        ([1, -1, 2], [0, 1], "out of range"),
        ([1, 2, 3], [1, 2], "offsets[0] must be 0"),
        ([1, 2, 3], [0, 2, 1], "non-decreasing"),
        ([1, 2, 3], [0, 5], "non-decreasing"),
    ],
)
def test_embedding_bag_refuses_bad_indices(
    sh: TorchShims, indices: list[int], offsets: list[int], message: str
) -> None:
    rc, _ = embedding_bag(sh, torch.randn(10, 4), torch.tensor(indices), torch.tensor(offsets), 0)
    assert rc == 1 and message in sh.error(), sh.error()


# --- LSTM layer ------------------------------------------------------------------------


def rnn_layer(
    sh: TorchShims,
    x: torch.Tensor,
    ws: list[torch.Tensor],
    hx: torch.Tensor,
    cx: torch.Tensor,
    reverse: bool,
    mode: int = 2,
) -> tuple[int, list[Handle]]:
    ret = outs(4)
    rc = sh.call(
        "aoti_torch_cpu_mkldnn_rnn_layer",
        sh.tensor(x),
        *[sh.tensor(w) for w in ws],
        sh.tensor(hx),
        sh.tensor(cx),
        ctypes.c_int32(int(reverse)),
        None,
        ctypes.c_int64(0),
        ctypes.c_int64(mode),
        ctypes.c_int64(hx.shape[-1]),
        ctypes.c_int64(1),
        ctypes.c_int32(1),
        ctypes.c_int32(0),
        ctypes.c_int32(0),
        ctypes.c_int32(0),
        *[ctypes.byref(r) for r in ret],
    )
    return rc, ret


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_matches_aten(sh: TorchShims, reverse: bool) -> None:
    torch.manual_seed(5)
    steps, batch, d_in, hidden = 6, 3, 7, 5
    x = torch.randn(steps, batch, d_in)
    ws = [
        torch.randn(4 * hidden, d_in),
        torch.randn(4 * hidden, hidden),
        torch.randn(4 * hidden),
        torch.randn(4 * hidden),
    ]
    hx, cx = torch.randn(1, batch, hidden), torch.randn(1, batch, hidden)
    want = torch.ops.aten.mkldnn_rnn_layer(
        x, *ws, hx, cx, reverse, [], 2, hidden, 1, True, False, False, False
    )
    rc, ret = rnn_layer(sh, x, ws, hx, cx, reverse)
    assert rc == 0, sh.error()
    got = [sh.torch(h) for h in ret]
    for g, w in zip(got[:3], want[:3], strict=True):
        assert_same_tensor(g, w, rtol=1e-5)
    # Also the textbook LSTM (nn.LSTM's own cell) as a second reference.
    lstm = torch.nn.LSTM(d_in, hidden)
    with torch.no_grad():
        for p, w in zip(lstm.parameters(), ws, strict=True):
            p.copy_(w)
        seq = x.flip(0) if reverse else x
        y, (h, _c) = lstm(seq, (hx, cx))
    torch.testing.assert_close(got[0], y.flip(0) if reverse else y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], h, rtol=1e-5, atol=1e-5)


def test_rnn_layer_refuses_other_modes(sh: TorchShims) -> None:
    x = torch.randn(2, 1, 3)
    ws = [torch.randn(8, 3), torch.randn(8, 2), torch.randn(8), torch.randn(8)]
    rc, _ = rnn_layer(sh, x, ws, torch.zeros(1, 1, 2), torch.zeros(1, 1, 2), False, mode=3)
    assert rc == 1 and "not LSTM" in sh.error()
    rc, _ = rnn_layer(
        sh,
        x,
        [*ws[:1], torch.randn(8, 3), *ws[2:]],
        torch.zeros(1, 1, 2),
        torch.zeros(1, 1, 2),
        False,
    )
    assert rc == 1 and "W_hh" in sh.error()


# --- the check family ------------------------------------------------------------------


_CHECK_CALLER = r"""
#include <cstdio>
#include <exception>

#include "shims/aoti_shim_abi.h"

// What a blob's wrapper does around a run: a failed check must arrive as a
// std::exception (the entry point turns it into a failed run), not return.
int main() {
  aoti_torch_check(true, "f", "wrapper.cpp", 3, "never");
  try {
    aoti_torch_check(false, "run_impl", "wrapper.cpp", 7, "Integer division by zero");
  } catch (const std::exception& e) {
    std::printf("caught: %s\nlast error: %s\n", e.what(), shimkit_shim_last_error());
    return 0;
  }
  std::printf("returned\n");
  return 1;
}
"""


def test_failed_check_throws_a_std_exception(libs: Any, config: Any, tmp_path: Any) -> None:
    source = tmp_path / "check_caller.cpp"
    source.write_text(_CHECK_CALLER)
    exe = tmp_path / "check_caller"
    root = ROOT
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            f"-I{root}",
            *config.flags,
            str(source),
            "-o",
            str(exe),
            f"-L{libs.shims.parent}",
            "-lshimkit_shims",
            f"-Wl,-rpath,{libs.shims.parent}",
        ],
        check=True,
        capture_output=True,
    )
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "caught: Integer division by zero (run_impl at wrapper.cpp:7)" in proc.stdout
    name = config.prefixed("aoti_torch_check")
    assert f"last error: {name}: Integer division by zero" in proc.stdout


def test_check_passes_and_inf_nan_check_reports(sh: TorchShims) -> None:
    # A true check returns; a false one throws (the test above: not through ctypes).
    sh.fn("aoti_torch_check")(ctypes.c_bool(True), b"f", b"file.cpp", ctypes.c_uint32(1), b"m")
    clean = sh.tensor(torch.randn(3, 4))
    assert sh.call("aoti_torch_check_inf_and_nan", b"x", clean) == 0
    assert sh.call("aoti_torch_check_inf_and_nan", b"ids", sh.tensor(torch.arange(4))) == 0
    nan = torch.randn(3, 4).t()  # strided
    nan[2, 1] = float("nan")
    assert sh.call("aoti_torch_check_inf_and_nan", b"buf3", sh.tensor(nan)) == 1
    assert "buf3 contains NaN" in sh.error()
    inf = torch.randn(5).to(torch.bfloat16)
    inf[4] = float("-inf")
    assert sh.call("aoti_torch_check_inf_and_nan", b"buf4", sh.tensor(inf)) == 1
    assert "buf4 contains inf" in sh.error()


# --- scatter and index_reduce ------------------------------------------------------------


def scatter(
    sh: TorchShims, name: str, self_t: torch.Tensor, dim: int, index: torch.Tensor, *rest: Any
) -> tuple[int, torch.Tensor]:
    out = torch.empty_like(self_t)
    rc = sh.call(
        name, sh.tensor(out), sh.tensor(self_t), ctypes.c_int64(dim), sh.tensor(index), *rest
    )
    return rc, out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce_matches_aten(
    sh: TorchShims, reduce: str, include_self: bool, dtype: torch.dtype
) -> None:
    torch.manual_seed(6)
    self_t = (torch.randn(4, 6) * 5).to(dtype)
    src = (torch.randn(4, 3) * 5).to(dtype)
    index = torch.tensor([[0, 2, 2], [5, 5, 1], [3, 0, 3], [4, 4, 4]])
    want = self_t.scatter_reduce(1, index, src, reduce, include_self=include_self)
    rc, got = scatter(
        sh,
        "aoti_torch_cpu_scatter_reduce_two_out",
        self_t,
        1,
        index,
        sh.tensor(src),
        reduce.encode(),
        ctypes.c_int32(int(include_self)),
    )
    assert rc == 0, sh.error()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_scatter_src_and_value_match_aten(sh: TorchShims) -> None:
    torch.manual_seed(7)
    self_t, src = torch.randn(5, 4), torch.randn(3, 4)
    index = torch.tensor([[0, 1, 2, 3], [4, 0, 1, 2], [1, 3, 4, 0]])  # no repeats per column
    rc, got = scatter(sh, "aoti_torch_cpu_scatter_src_out", self_t, 0, index, sh.tensor(src))
    assert rc == 0, sh.error()
    assert torch.equal(got, self_t.scatter(0, index, src))
    rc, got = scatter(
        sh, "aoti_torch_cpu_scatter_value_out", self_t, -2, index, ctypes.c_double(2.5)
    )
    assert rc == 0, sh.error()
    assert torch.equal(got, self_t.scatter(0, index, 2.5))


def test_scatter_refuses_out_of_bounds_index(sh: TorchShims) -> None:
    rc, _ = scatter(
        sh,
        "aoti_torch_cpu_scatter_src_out",
        torch.zeros(2, 3),
        1,
        torch.tensor([[0, 3]]),
        sh.tensor(torch.ones(1, 2)),
    )
    assert rc == 1 and "out of bounds" in sh.error()
    rc, _ = scatter(
        sh,
        "aoti_torch_cpu_scatter_reduce_two_out",
        torch.zeros(2, 3),
        1,
        torch.tensor([[0, 1]]),
        sh.tensor(torch.ones(1, 2)),
        b"median",
        ctypes.c_int32(1),
    )
    assert rc == 1 and "unknown reduction 'median'" in sh.error()


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_aten(sh: TorchShims, reduce: str, include_self: bool) -> None:
    torch.manual_seed(8)
    self_t, src = torch.randn(5, 3).t(), torch.randn(3, 4)  # strided self
    index = torch.tensor([0, 2, 0, 1])
    want = self_t.index_reduce(1, index, src, reduce, include_self=include_self)
    ret = Handle()
    rc = sh.call(
        "aoti_torch_cpu_index_reduce",
        sh.tensor(self_t),
        ctypes.c_int64(1),
        sh.tensor(index),
        sh.tensor(src),
        reduce.encode(),
        ctypes.c_int32(int(include_self)),
        ctypes.byref(ret),
    )
    assert rc == 0, sh.error()
    got = sh.torch(ret)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# --- scans and searches ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "dtype", "out_dtype"),
    [
        ("cumsum", torch.float32, None),
        ("cumsum", torch.int32, None),  # integers accumulate into int64
        ("cumsum", torch.bool, None),
        ("cumsum", torch.float32, torch.float64),
        ("cumsum", torch.bfloat16, None),
        ("cumprod", torch.float32, None),
        ("cumprod", torch.int64, None),
        ("logcumsumexp", torch.float32, None),
        ("logcumsumexp", torch.float64, None),
    ],
)
@pytest.mark.parametrize("dim", [0, -1])
def test_scans_match_aten(
    sh: TorchShims, op: str, dtype: torch.dtype, out_dtype: torch.dtype | None, dim: int
) -> None:
    torch.manual_seed(9)
    x = (torch.rand(6, 4) * 3).to(dtype).t()  # strided
    if dtype == torch.bool:
        x = torch.rand(6, 4).t() > 0.5
    ret = Handle()
    if op == "logcumsumexp":
        want = torch.logcumsumexp(x, dim)
        rc = sh.call(
            "aoti_torch_cpu_logcumsumexp", sh.tensor(x), ctypes.c_int64(dim), ctypes.byref(ret)
        )
    else:
        want = getattr(torch, op)(x, dim, dtype=out_dtype)
        code = ctypes.c_int32(TORCH_CODES[out_dtype]) if out_dtype else None
        rc = sh.call(
            f"aoti_torch_cpu_{op}",
            sh.tensor(x),
            ctypes.c_int64(dim),
            ctypes.byref(code) if code is not None else None,
            ctypes.byref(ret),
        )
    assert rc == 0, sh.error()
    got = sh.torch(ret)
    assert got.dtype == want.dtype and got.is_contiguous()
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_logcumsumexp_handles_infinities(sh: TorchShims) -> None:
    x = torch.tensor([float("-inf"), float("-inf"), 0.0, float("inf"), 1.0])
    ret = Handle()
    sh.ok("aoti_torch_cpu_logcumsumexp", sh.tensor(x), ctypes.c_int64(0), ctypes.byref(ret))
    torch.testing.assert_close(sh.torch(ret), torch.logcumsumexp(x, 0))


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("out_int32", [False, True])
def test_searchsorted_and_bucketize_match_aten(
    sh: TorchShims, right: bool, out_int32: bool
) -> None:
    torch.manual_seed(10)
    seq = torch.sort(torch.randn(3, 7), dim=1).values
    values = torch.cat([torch.randn(3, 5), seq[:, 2:4]], dim=1)  # ties with the sequence
    ret = Handle()
    sh.ok(
        "aoti_torch_cpu_searchsorted_Tensor",
        sh.tensor(seq),
        sh.tensor(values),
        ctypes.c_int32(int(out_int32)),
        ctypes.c_int32(int(right)),
        None,
        None,
        ctypes.byref(ret),
    )
    assert_same_tensor(
        sh.torch(ret), torch.searchsorted(seq, values, out_int32=out_int32, right=right)
    )
    edges = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    sh.ok(
        "aoti_torch_cpu_bucketize_Tensor",
        sh.tensor(values),
        sh.tensor(edges),
        ctypes.c_int32(int(out_int32)),
        ctypes.c_int32(int(right)),
        ctypes.byref(ret),
    )
    assert_same_tensor(
        sh.torch(ret), torch.bucketize(values, edges, out_int32=out_int32, right=right)
    )


def test_searchsorted_with_sorter_and_side(sh: TorchShims) -> None:
    torch.manual_seed(11)
    seq = torch.randn(9)
    sorter = torch.argsort(seq)
    values = torch.randn(4, 3)
    side = ctypes.c_char_p(b"right")
    ret = Handle()
    sorter_h = sh.tensor(sorter)
    sh.ok(
        "aoti_torch_cpu_searchsorted_Tensor",
        sh.tensor(seq),
        sh.tensor(values),
        ctypes.c_int32(0),
        ctypes.c_int32(0),
        ctypes.byref(side),
        ctypes.byref(sorter_h),
        ctypes.byref(ret),
    )
    assert torch.equal(sh.torch(ret), torch.searchsorted(seq, values, side="right", sorter=sorter))
    bad = sh.tensor(torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 9]))
    rc = sh.call(
        "aoti_torch_cpu_searchsorted_Tensor",
        sh.tensor(seq),
        sh.tensor(values),
        ctypes.c_int32(0),
        ctypes.c_int32(0),
        None,
        ctypes.byref(bad),
        ctypes.byref(ret),
    )
    assert rc == 1 and "sorter index out of range" in sh.error()


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.int16, torch.uint8, torch.bool]
)
def test_sort_and_topk_every_dtype(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(12)
    x = (torch.randn(3, 8) * 4).to(dtype) if dtype != torch.bool else torch.rand(3, 8) > 0.5
    values, indices = Handle(), Handle()
    stable = ctypes.c_int32(1)
    sh.ok(
        "aoti_torch_cpu_sort_stable",
        sh.tensor(x),
        ctypes.byref(stable),
        ctypes.c_int64(1),
        ctypes.c_int32(1),
        ctypes.byref(values),
        ctypes.byref(indices),
    )
    want = torch.sort(x, dim=1, descending=True, stable=True)
    assert torch.equal(sh.torch(values), want.values)
    assert torch.equal(sh.torch(indices), want.indices)
    if dtype != torch.bool:
        sh.ok(
            "aoti_torch_cpu_topk",
            sh.tensor(x),
            ctypes.c_int64(3),
            ctypes.c_int64(1),
            ctypes.c_int32(1),
            ctypes.c_int32(1),
            ctypes.byref(values),
            ctypes.byref(indices),
        )
        assert torch.equal(sh.torch(values), torch.topk(x, 3, dim=1).values)
        sh.free(indices)


# --- reduced-precision GEMMs and convolution --------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_gemms_match_aten(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(13)
    a, b, bias = torch.randn(5, 16).to(dtype), torch.randn(8, 16).to(dtype).t(), torch.randn(8)
    bias = bias.to(dtype)
    out = torch.empty(5, 8, dtype=dtype)
    sh.ok(
        "aoti_torch_cpu_addmm_out",
        sh.tensor(out),
        sh.tensor(bias),
        sh.tensor(a),
        sh.tensor(b),
        ctypes.c_double(1.0),
        ctypes.c_double(1.0),
    )
    tol = 1e-2 if dtype == torch.float16 else 3e-2
    torch.testing.assert_close(out, torch.addmm(bias, a, b), rtol=tol, atol=tol)
    out3 = torch.empty(2, 5, 8, dtype=dtype)
    a3, b3 = torch.randn(2, 5, 16).to(dtype), torch.randn(2, 16, 8).to(dtype)
    sh.ok("aoti_torch_cpu_bmm_out", sh.tensor(out3), sh.tensor(a3), sh.tensor(b3))
    torch.testing.assert_close(out3, torch.bmm(a3, b3), rtol=tol, atol=tol)


def call_convolution(
    sh: TorchShims,
    x: torch.Tensor,
    w: torch.Tensor | Handle,
    b: torch.Tensor | None = None,
    padding: int = 1,
    groups: int = 1,
    stride: int = 1,
    dilation: int = 1,
    output_padding: int | None = None,
    spatial: int | None = None,
) -> tuple[int, Handle]:
    """The shim's return code and result for a convolution (1-D, 2-D or 3-D, from x's
    rank unless `spatial` says how many values each list has); transposed when
    `output_padding` is given; `w` a tensor or a shim handle."""
    bias_h = sh.tensor(b) if b is not None else None
    spatial = x.dim() - 2 if spatial is None else spatial
    out = Handle()
    rc = sh.call(
        "aoti_torch_cpu_convolution",
        sh.tensor(x),
        w if isinstance(w, Handle) else sh.tensor(w),
        ctypes.byref(bias_h) if bias_h is not None else None,
        ints(*[stride] * spatial),
        ctypes.c_int64(spatial),
        ints(*[padding] * spatial),
        ctypes.c_int64(spatial),
        ints(*[dilation] * spatial),
        ctypes.c_int64(spatial),
        ctypes.c_int32(int(output_padding is not None)),
        ints(*[output_padding or 0] * spatial),
        ctypes.c_int64(spatial),
        ctypes.c_int64(groups),
        ctypes.byref(out),
    )
    return rc, out


def convolution(
    sh: TorchShims,
    x: torch.Tensor,
    w: torch.Tensor | Handle,
    b: torch.Tensor | None,
    padding: int = 1,
    groups: int = 1,
    stride: int = 1,
    dilation: int = 1,
    output_padding: int | None = None,
) -> torch.Tensor:
    """call_convolution's result as a tensor; the test fails if the shim does."""
    rc, out = call_convolution(sh, x, w, b, padding, groups, stride, dilation, output_padding)
    assert rc == 0, f"aoti_torch_cpu_convolution failed: {sh.error()}"
    return sh.torch(out)


# (stride, padding, dilation, output_padding, groups)
TRANSPOSED_CASES = [(2, 1, 1, 1, 1), (1, 0, 1, 0, 1), (2, 1, 2, 1, 2), (3, 2, 1, 2, 4)]


@pytest.mark.parametrize("dims", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize(("stride", "padding", "dilation", "out_pad", "groups"), TRANSPOSED_CASES)
def test_transposed_convolution_matches_aten(
    sh: TorchShims,
    dims: int,
    channels_last: bool,
    stride: int,
    padding: int,
    dilation: int,
    out_pad: int,
    groups: int,
) -> None:
    """nn.ConvTranspose2d/3d's call, in ATen's memory format (channels_last_3d only where
    ATen runs the 3-D one on oneDNN)."""
    torch.manual_seed(stride + padding + groups)
    x = torch.randn(2, 8, 5, 6) if dims == 2 else torch.randn(1, 8, 3, 4, 5)
    w = torch.randn(8, 12 // groups, *([3, 3] if dims == 2 else [3, 2, 3]))
    b = torch.randn(12)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if dims == 2 else torch.channels_last_3d)
    spatial = [[v] * dims for v in (stride, padding, dilation, out_pad)]
    want = torch.ops.aten.convolution(x, w, b, *spatial[:3], True, spatial[3], groups)
    got = convolution(sh, x, w, b, padding, groups, stride, dilation, out_pad)
    assert_same_tensor(got, want, rtol=1e-4)


def test_transposed_convolution_1d_and_bad_output_padding(sh: TorchShims) -> None:
    torch.manual_seed(16)
    x, w = torch.randn(2, 4, 9), torch.randn(4, 3, 5)
    want = torch.nn.functional.conv_transpose1d(x, w, None, stride=2, padding=2, output_padding=1)
    got = convolution(sh, x, w, None, padding=2, stride=2, output_padding=1)
    assert_same_tensor(got, want, rtol=1e-4)
    rc, _ = call_convolution(sh, x, w, padding=0, stride=2, output_padding=2)
    assert rc == 1 and "output_padding must be smaller" in sh.error()


# (stride, padding, dilation, groups): a video stem, a strided one, dilated and grouped,
# depthwise.
CONV3D_CASES = [(1, 1, 1, 1), (2, 0, 1, 1), (1, 2, 2, 2), (1, 1, 1, 4)]


@pytest.mark.parametrize("x_cl", [False, True], ids=["ncdhw", "ndhwc"])
@pytest.mark.parametrize("w_cl", [False, True], ids=["w-ncdhw", "w-ndhwc"])
@pytest.mark.parametrize(("stride", "padding", "dilation", "groups"), CONV3D_CASES)
def test_conv3d_matches_aten_values_and_strides(
    sh: TorchShims, x_cl: bool, w_cl: bool, stride: int, padding: int, dilation: int, groups: int
) -> None:
    """nn.Conv3d's call: values, and the output in ATen's memory format (channels_last_3d
    when the input or the weight is)."""
    torch.manual_seed(stride + padding + groups)
    x = torch.randn(2, 4, 5, 7, 6)
    w, b = torch.randn(8, 4 // groups, 3, 3, 2), torch.randn(8)
    if x_cl:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    if w_cl:
        w = w.contiguous(memory_format=torch.channels_last_3d)
    want = torch.ops.aten.convolution(
        x, w, b, [stride] * 3, [padding] * 3, [dilation] * 3, False, [0] * 3, groups
    )
    got = convolution(sh, x, w, b, padding, groups, stride, dilation)
    assert_same_tensor(got, want, rtol=1e-4)


def test_conv3d_output_format_follows_atens_backend_choice(sh: TorchShims) -> None:
    """A 5-D output is channels_last_3d only where ATen's CPU convolution runs on oneDNN;
    its slow 3-D kernels (batch 1, small kernels, one group; transposed with output
    padding at least the stride) write contiguous output, and the blob was compiled
    against that. 4-D outputs stay channels_last on every backend (the control)."""
    torch.manual_seed(21)
    seen: set[tuple[int, bool]] = set()
    cases = itertools.product((1, 2), (1, 3, 5), (1, 2), (1, 2), (False, True), (0, 1))
    for n, k, stride, groups, transposed, out_pad in cases:
        if out_pad and not transposed:
            continue
        # Output padding may reach the stride only below the dilation.
        dilation = 2 if out_pad >= stride else 1
        for dims, fmt in ((3, torch.channels_last_3d), (2, torch.channels_last)):
            x = torch.randn(n, 4, *[7] * dims).contiguous(memory_format=fmt)
            w = torch.randn(4, 4 // groups, *[k] * dims)
            pads = [out_pad] * dims
            want = torch.ops.aten.convolution(
                x, w, None, [stride] * dims, [0] * dims, [dilation] * dims, transposed, pads, groups
            )
            op = out_pad if transposed else None
            got = convolution(sh, x, w, None, 0, groups, stride, dilation, op)
            assert got.stride() == want.stride(), (dims, n, k, stride, groups, transposed, pads)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            seen.add((dims, want.is_contiguous()))
    # Both formats occur for 5-D outputs, only channels_last for 4-D ones.
    assert seen == {(3, True), (3, False), (2, False)}


@pytest.mark.parametrize(
    ("x", "w", "message"),
    [
        (torch.randn(2, 3), torch.randn(4, 3), "needs 1 to 3 spatial dims, got 0"),
        (torch.randn(1, 2, 3, 3, 3, 3), torch.randn(2, 2, 1, 1, 1, 1), "1 to 3 spatial dims"),
        (torch.randn(1, 2, 4, 4, 4), torch.randn(2, 2, 3, 3), "a weight of its rank"),
    ],
    ids=["2-D", "6-D", "rank-mismatch"],
)
def test_convolution_refuses_other_ranks(
    sh: TorchShims, x: torch.Tensor, w: torch.Tensor, message: str
) -> None:
    """A rank the shims do not convolve is refused with one line (never read past the
    parameter lists, whose length follows the input's rank)."""
    rc, _ = call_convolution(sh, x, w, padding=0, spatial=max(x.dim() - 2, 1))
    assert rc == 1 and message in sh.error(), sh.error()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_convolution_matches_aten(sh: TorchShims, dtype: torch.dtype) -> None:
    torch.manual_seed(14)
    x = torch.randn(2, 4, 7, 7).to(dtype).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(6, 4, 3, 3).to(dtype), torch.randn(6).to(dtype)
    want = torch.nn.functional.conv2d(x.float(), w.float(), b.float(), padding=1).to(dtype)
    got = convolution(sh, x, w, b)
    assert (
        got.dtype == dtype
        and got.stride() == want.contiguous(memory_format=torch.channels_last).stride()
    )
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("groups", [1, 8])  # 8: depthwise
def test_convolution_weight_cache_follows_the_storage(sh: TorchShims, groups: int) -> None:
    """Weights in borrowed storage are packed once per storage: a new storage at the same
    address with new bytes (a reloaded model) gets new packed weights, and a weight the
    blob computed (owned storage) is never cached."""
    torch.manual_seed(15)
    x = torch.randn(1, 8, 6, 6).contiguous(memory_format=torch.channels_last)
    buffer = torch.randn(16, 8 // groups, 3, 3)
    first = convolution(sh, x, buffer, None, groups=groups)
    torch.testing.assert_close(
        first, torch.nn.functional.conv2d(x, buffer, padding=1, groups=groups)
    )
    sh._keep.clear()  # the first weight's handle is gone; same address, new bytes
    buffer.copy_(torch.randn(16, 8 // groups, 3, 3))
    second = convolution(sh, x, buffer, None, groups=groups)
    torch.testing.assert_close(
        second, torch.nn.functional.conv2d(x, buffer, padding=1, groups=groups)
    )
    assert not torch.allclose(first, second)
    # An owned weight (what a blob's kernels write) with new bytes on every call.
    owned = Handle()
    sh.ok(
        "aoti_torch_empty_strided",
        ctypes.c_int64(4),
        ints(16, 8 // groups, 3, 3),
        ints(*buffer.stride()),
        ctypes.c_int32(6),
        ctypes.c_int32(0),
        ctypes.c_int32(-1),
        ctypes.byref(owned),
    )
    data = ctypes.c_void_p()
    sh.ok("aoti_torch_get_data_ptr", owned, ctypes.byref(data))
    for _ in range(2):
        w = torch.randn(16, 8 // groups, 3, 3)
        ctypes.memmove(data.value, w.data_ptr(), w.numel() * 4)
        torch.testing.assert_close(
            convolution(sh, x, owned, None, groups=groups),
            torch.nn.functional.conv2d(x, w, padding=1, groups=groups),
        )
    sh.free(owned)


def test_convolution_without_onednn_still_matches(libs: Any) -> None:
    """SHIMKIT_ONEDNN=0: the im2col path (the fallback when oneDNN is missing), 2-D and
    3-D, plain and transposed, both memory formats."""
    code = (
        "import ctypes, torch\n"
        "from shimkit.config import load_config\n"
        "from tests.runtime.test_shim_families import TorchShims, convolution\n"
        f"sh = TorchShims(ctypes.CDLL({str(libs.shims)!r}), load_config())\n"
        "torch.manual_seed(0)\n"
        "for cl in (False, True):\n"
        "    x = torch.randn(2, 6, 9, 9)\n"
        "    if cl: x = x.contiguous(memory_format=torch.channels_last)\n"
        "    w, b = torch.randn(4, 3, 3, 3), torch.randn(4)\n"
        "    got = convolution(sh, x, w, b, groups=2)\n"
        "    want = torch.nn.functional.conv2d(x, w, b, padding=1, groups=2)\n"
        "    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)\n"
        "    assert got.stride() == want.stride()\n"
        "    wt = torch.randn(6, 2, 3, 3)\n"
        "    got = convolution(sh, x, wt, b, 1, 2, 2, 1, 1)\n"
        "    want = torch.nn.functional.conv_transpose2d(x, wt, b, 2, 1, 1, 2)\n"
        "    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)\n"
        "    assert got.stride() == want.stride()\n"
        "    fmt = torch.channels_last_3d if cl else torch.contiguous_format\n"
        "    x3 = torch.randn(1, 4, 4, 5, 6).contiguous(memory_format=fmt)\n"
        "    w3, wt3 = torch.randn(6, 2, 3, 2, 3), torch.randn(4, 3, 2, 3, 2)\n"
        "    got = convolution(sh, x3, w3, b[:1].repeat(6), 1, 2, 2, 1)\n"
        "    want = torch.nn.functional.conv3d(x3, w3, b[:1].repeat(6), 2, 1, 1, 2)\n"
        "    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)\n"
        "    assert got.stride() == want.stride()\n"
        "    got = convolution(sh, x3, wt3, None, 1, 2, 2, 1, 1)\n"
        "    want = torch.nn.functional.conv_transpose3d(x3, wt3, None, 2, 1, 1, 2)\n"
        "    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)\n"
        "    assert got.stride() == want.stride()\n"
        "print('im2col ok')\n"
    )
    root = str(ROOT)
    env = {**os.environ, "SHIMKIT_ONEDNN": "0", "PYTHONPATH": root}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=root,
    )
    assert proc.returncode == 0 and "im2col ok" in proc.stdout, proc.stderr[-2000:]


# --- the softmax kernels behind attention ---------------------------------------------

_SOFTMAX_CHECK = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "shims/softmax_rows.h"

using shimkit::SoftmaxKernel;

// Worst error of every available kernel against a double-precision softmax, on rows
// of many lengths (tails included) with masked (-inf) entries; SABOTAGE adds 1e-3 to
// one element first (the negative control).
int main(int argc, char** argv) {
  const bool sabotage = argc > 1;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (SoftmaxKernel k : {SoftmaxKernel::kPortable, SoftmaxKernel::kAvx2,
                          SoftmaxKernel::kAvx512}) {
    if (!shimkit::softmax_kernel_available(k)) {
      std::printf("kernel %d unavailable\n", static_cast<int>(k));
      continue;
    }
    double worst = 0, worst_lse = 0;
    for (int n : {1, 3, 7, 8, 9, 15, 16, 17, 33, 128, 1000}) {
      for (int t = 0; t < 40; ++t) {
        std::vector<float> row(n);
        for (float& x : row) x = gen() % 5 == 0 ? -INFINITY : normal(gen);
        double max = -INFINITY, sum = 0;
        for (float x : row) max = x > max ? x : max;
        std::vector<double> want(n, 0.0);
        if (std::isfinite(max)) {
          for (int j = 0; j < n; ++j) sum += want[j] = std::exp(double(row[j]) - max);
          for (double& w : want) w /= sum;
        }
        const float lse = shimkit::softmax_row_with(k, row.data(), n);
        if (sabotage) row[0] += 1e-3f;
        for (int j = 0; j < n; ++j) worst = std::fmax(worst, std::fabs(row[j] - want[j]));
        if (std::isfinite(max)) {
          worst_lse = std::fmax(worst_lse, std::fabs(lse - (max + std::log(sum))));
        } else if (!(std::isinf(lse) && lse < 0)) {
          worst_lse = INFINITY;  // an all-masked row must give -inf
        }
      }
    }
    std::printf("kernel %d worst %.3g lse %.3g\n", static_cast<int>(k), worst, worst_lse);
    if (!(worst < 1e-5 && worst_lse < 1e-5)) return 1;
  }
  return 0;
}
"""


def test_every_softmax_kernel_matches_a_double_softmax(repo_root: Any, tmp_path: Any) -> None:
    source = tmp_path / "softmax_check.cpp"
    source.write_text(_SOFTMAX_CHECK)
    exe = tmp_path / "softmax_check"
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-O2",
            f"-I{repo_root}",
            str(source),
            str(repo_root / "shims" / "softmax_rows.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
    )
    good = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=False)
    assert good.returncode == 0, good.stdout
    assert "kernel 0 worst" in good.stdout  # the portable kernel always runs
    bad = subprocess.run(
        [str(exe), "sabotage"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 1, bad.stdout  # negative control: a 1e-3 error is caught
