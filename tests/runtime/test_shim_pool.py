"""The slim CPU pooling fallbacks and baddbmm, called directly, against ATen.

Inductor calls `avg_pool2d` and `adaptive_max_pool2d` for windows too large for its own
loops, and `baddbmm_out` for batched GEMMs with a scaled input. Each case is compared
with the ATen op Inductor would have called in libtorch: values, indices, output sizes,
strides (the input's memory format) and dtypes; bad arguments fail with a message.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from tests.runtime.shimcall import Handle, TorchShims, ints, outs


@pytest.fixture(scope="module")
def sh(shims: ctypes.CDLL, config: Any) -> TorchShims:
    return TorchShims(shims, config)


def avg_pool2d(
    sh: TorchShims,
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor: int | None = None,
) -> tuple[int, Handle]:
    [out] = outs(1)
    divisor_arg = ctypes.byref(ctypes.c_int64(divisor)) if divisor is not None else None
    rc = sh.call(
        "aoti_torch_cpu_avg_pool2d",
        sh.tensor(x),
        ints(*kernel),
        ctypes.c_int64(len(kernel)),
        ints(*stride),
        ctypes.c_int64(len(stride)),
        ints(*padding),
        ctypes.c_int64(len(padding)),
        ctypes.c_int32(int(ceil_mode)),
        ctypes.c_int32(int(count_include_pad)),
        divisor_arg,
        ctypes.byref(out),
    )
    return rc, out


def assert_same(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-6) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert got.stride() == want.stride(), "memory format differs from ATen's"
    torch.testing.assert_close(got, want, rtol=rtol, atol=rtol, equal_nan=True)


AVG_CASES = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor
    ([9], [], [0], False, True, None),  # a global 9x9 average (stride = kernel)
    ([9, 7], [3, 2], [4, 3], False, True, None),
    ([9, 7], [3, 2], [4, 3], False, False, None),  # padding left out of the count
    ([8], [3], [2], True, True, None),  # ceil_mode: a last, partial window
    ([8], [3], [2], True, False, None),
    ([6, 9], [5], [1, 0], True, True, 7),  # divisor_override
]


@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil", "include", "divisor"), AVG_CASES)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "3d"])
def test_avg_pool2d_matches_aten(
    sh: TorchShims,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil: bool,
    include: bool,
    divisor: int | None,
    layout: str,
) -> None:
    torch.manual_seed(3)
    x = torch.randn(2, 5, 9, 17)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "3d":
        x = x[0]
    want = torch.ops.aten.avg_pool2d(x, kernel, stride, padding, ceil, include, divisor)
    rc, out = avg_pool2d(sh, x, kernel, stride, padding, ceil, include, divisor)
    assert rc == 0, sh.error()
    assert_same(sh.torch(out), want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_avg_pool2d_other_float_dtypes(sh: TorchShims, dtype: torch.dtype) -> None:
    x = torch.randn(1, 3, 12, 12).to(dtype)
    want = torch.ops.aten.avg_pool2d(x, [6], [6], [0])
    rc, out = avg_pool2d(sh, x, [6], [6], [0])
    assert rc == 0, sh.error()
    assert_same(sh.torch(out), want, rtol=1e-2 if dtype != torch.float64 else 1e-12)


@pytest.mark.parametrize(
    ("x", "kernel", "stride", "padding", "message"),
    [
        (torch.randn(2, 3, 4, 5, 6), [2], [], [0], "3-D or 4-D"),
        (torch.randn(1, 3, 8, 8), [4], [], [3], "half the kernel"),
        (torch.randn(1, 3, 8, 8), [4, 4, 4], [], [0], "1 or 2 values"),
        (torch.randn(1, 3, 8, 8), [0], [], [0], "positive"),
        (torch.randint(0, 3, (1, 3, 8, 8)), [4], [], [0], "dtype"),
    ],
)
def test_avg_pool2d_refuses_bad_arguments(
    sh: TorchShims,
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    message: str,
) -> None:
    rc, _ = avg_pool2d(sh, x, kernel, stride, padding)
    assert rc != 0
    assert "avg_pool2d" in sh.error() and message in sh.error()


def adaptive_max_pool2d(
    sh: TorchShims, x: torch.Tensor, size: list[int]
) -> tuple[int, Handle, Handle]:
    values, indices = outs(2)
    rc = sh.call(
        "aoti_torch_cpu_adaptive_max_pool2d",
        sh.tensor(x),
        ints(*size),
        ctypes.c_int64(len(size)),
        ctypes.byref(values),
        ctypes.byref(indices),
    )
    return rc, values, indices


@pytest.mark.parametrize("size", [[1, 1], [3, 4], [5, 2], [9, 11]])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "3d"])
def test_adaptive_max_pool2d_matches_aten(sh: TorchShims, size: list[int], layout: str) -> None:
    torch.manual_seed(4)
    x = torch.randn(2, 6, 9, 11)
    x[0, 1, 4, 4] = float("nan")  # propagates, with its index
    x[1, 2, :3, :3] = 7.0  # ties: the first maximum's index
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "3d":
        x = x[0]
    want_values, want_indices = torch.ops.aten.adaptive_max_pool2d(x, size)
    rc, values, indices = adaptive_max_pool2d(sh, x, size)
    assert rc == 0, sh.error()
    assert_same(sh.torch(values), want_values)
    assert_same(sh.torch(indices), want_indices)


def test_adaptive_max_pool2d_refuses_bad_sizes(sh: TorchShims) -> None:
    x = torch.randn(1, 2, 5, 5)
    assert adaptive_max_pool2d(sh, x, [0, 2])[0] != 0
    assert "output_size must be positive" in sh.error()
    assert adaptive_max_pool2d(sh, x, [2])[0] != 0
    assert "2 values" in sh.error()


def baddbmm(
    sh: TorchShims,
    out: torch.Tensor,
    s: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    beta: float,
    alpha: float,
) -> int:
    return sh.call(
        "aoti_torch_cpu_baddbmm_out",
        sh.tensor(out),
        sh.tensor(s),
        sh.tensor(a),
        sh.tensor(b),
        ctypes.c_double(beta),
        ctypes.c_double(alpha),
    )


@pytest.mark.parametrize("self_shape", [(3, 4, 6), (1, 4, 6), (4, 6), (6,)])
@pytest.mark.parametrize(("beta", "alpha"), [(1.0, 1.0), (0.5, 0.125), (0.0, 2.0)])
def test_baddbmm_matches_aten(
    sh: TorchShims, self_shape: tuple[int, ...], beta: float, alpha: float
) -> None:
    torch.manual_seed(5)
    s = torch.randn(self_shape)
    if beta == 0.0:
        s[..., 0] = float("nan")  # beta 0: self is not read (ATen's rule)
    a = torch.randn(3, 4, 5)
    b = torch.randn(3, 6, 5).transpose(1, 2)  # a transposed operand, as attention has
    want = torch.baddbmm(s, a, b, beta=beta, alpha=alpha)
    out = torch.empty(3, 4, 6)
    assert baddbmm(sh, out, s, a, b, beta, alpha) == 0, sh.error()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_baddbmm_bfloat16_and_a_bad_batch(sh: TorchShims) -> None:
    s, a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)
    out = torch.empty(2, 3, 4, dtype=torch.bfloat16)
    args = [t.to(torch.bfloat16) for t in (s, a, b)]
    assert baddbmm(sh, out, *args, 1.0, 1.0) == 0, sh.error()
    want = torch.baddbmm(*args)
    torch.testing.assert_close(out.float(), want.float(), rtol=2e-2, atol=2e-2)
    assert baddbmm(sh, torch.empty(2, 3, 4), torch.randn(3, 3, 4), a, b, 1.0, 1.0) != 0
    assert "does not broadcast" in sh.error()
