"""The slim CPU pooling fallbacks and baddbmm, called directly, against ATen.

Inductor calls the pooling fallbacks (`avg_pool2d`/`3d`, `max_pool2d`/`3d_with_indices`,
`adaptive_max_pool2d`/`3d`, `_adaptive_avg_pool2d`/`3d`) for windows too large for its own
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


# --- max pooling with indices, 3-D pooling, adaptive average pooling ---------------------


def pool_call(sh: TorchShims, name: str, x: torch.Tensor, *args: Any, results: int) -> list[Any]:
    """Calls shim `name` on x with int lists (as pointer and length) and scalars; returns
    the results as tensors. Fails the test with the shim's message if it fails."""
    call_args: list[Any] = [sh.tensor(x)]
    for arg in args:
        if isinstance(arg, list):
            call_args += [ints(*arg), ctypes.c_int64(len(arg))]
        else:
            call_args.append(arg)
    handles = outs(results)
    rc = sh.call(name, *call_args, *[ctypes.byref(h) for h in handles])
    assert rc == 0, sh.error()
    return [sh.torch(h) for h in handles]


LAYOUTS_2D = {
    "contiguous": lambda x: x,
    "channels_last": lambda x: x.contiguous(memory_format=torch.channels_last),
    "unbatched": lambda x: x[0],
}
LAYOUTS_3D = {
    "contiguous": lambda x: x,
    "channels_last_3d": lambda x: x.contiguous(memory_format=torch.channels_last_3d),
    "unbatched": lambda x: x[0],
}

MAX_CASES = [
    # kernel, stride, padding, dilation, ceil_mode
    ([9], [1], [4], [1], False),  # SPP's 9x9, stride 1, same size out
    ([13], [1], [6], [1], False),  # SPP's 13x13
    ([7, 5], [3, 2], [3, 2], [1, 1], True),  # ceil_mode: a last, partial window
    ([3], [2], [1], [3], False),  # dilated (Inductor's own loops take no dilation)
    ([6], [], [0], [1], False),  # an empty stride: the kernel size
]


@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation", "ceil"), MAX_CASES)
@pytest.mark.parametrize("layout", list(LAYOUTS_2D))
def test_max_pool2d_with_indices_matches_aten(
    sh: TorchShims,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    ceil: bool,
    layout: str,
) -> None:
    torch.manual_seed(5)
    x = torch.randn(2, 4, 13, 15)
    x[0, 1, 6, 6] = float("nan")  # propagates, with its index
    x[1, 2, :4, :4] = 7.0  # ties: the first maximum's index
    x[1, 3] = float("-inf")  # all -inf: the window's first element
    x = LAYOUTS_2D[layout](x)
    want = torch.ops.aten.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil)
    got = pool_call(
        sh, "aoti_torch_cpu_max_pool2d_with_indices", x, kernel, stride, padding, dilation,
        ctypes.c_int32(int(ceil)), results=2,
    )  # fmt: skip
    for g, w in zip(got, want, strict=True):
        assert_same(g, w)


@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation", "ceil"), MAX_CASES[2:])
@pytest.mark.parametrize("layout", list(LAYOUTS_3D))
def test_max_pool3d_with_indices_matches_aten(
    sh: TorchShims,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    ceil: bool,
    layout: str,
) -> None:
    torch.manual_seed(6)
    x = torch.randn(2, 3, 7, 9, 8)
    x[0, 1, 3, 4, 4] = float("nan")
    x = LAYOUTS_3D[layout](x)
    kernel3 = kernel if len(kernel) == 1 else [3, *kernel]
    stride3 = stride if len(stride) < 2 else [1, *stride]
    padding3 = padding if len(padding) == 1 else [1, *padding]
    dilation3 = dilation if len(dilation) == 1 else [1, *dilation]
    want = torch.ops.aten.max_pool3d_with_indices(x, kernel3, stride3, padding3, dilation3, ceil)
    got = pool_call(
        sh, "aoti_torch_cpu_max_pool3d_with_indices", x, kernel3, stride3, padding3, dilation3,
        ctypes.c_int32(int(ceil)), results=2,
    )  # fmt: skip
    for g, w in zip(got, want, strict=True):
        assert_same(g, w)


@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil", "include", "divisor"), AVG_CASES)
@pytest.mark.parametrize("layout", list(LAYOUTS_3D))
def test_avg_pool3d_matches_aten(
    sh: TorchShims,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil: bool,
    include: bool,
    divisor: int | None,
    layout: str,
) -> None:
    """avg_pool3d writes contiguous output even for a channels_last_3d input (ATen's)."""
    torch.manual_seed(7)
    x = LAYOUTS_3D[layout](torch.randn(2, 3, 10, 9, 17))
    kernel3 = kernel if len(kernel) == 1 else [5, *kernel]
    stride3 = stride if len(stride) < 2 else [2, *stride]
    padding3 = padding if len(padding) == 1 else [2, *padding]
    want = torch.ops.aten.avg_pool3d(x, kernel3, stride3, padding3, ceil, include, divisor)
    divisor_arg = ctypes.byref(ctypes.c_int64(divisor)) if divisor is not None else None
    [got] = pool_call(
        sh, "aoti_torch_cpu_avg_pool3d", x, kernel3, stride3, padding3,
        ctypes.c_int32(int(ceil)), ctypes.c_int32(int(include)), divisor_arg, results=1,
    )  # fmt: skip
    assert_same(got, want, rtol=1e-5)


@pytest.mark.parametrize("size", [[1, 1, 1], [2, 3, 4], [5, 2, 7]])
@pytest.mark.parametrize("layout", list(LAYOUTS_3D))
def test_adaptive_max_pool3d_matches_aten(sh: TorchShims, size: list[int], layout: str) -> None:
    torch.manual_seed(8)
    x = torch.randn(2, 3, 5, 9, 11)
    x[0, 1, 2, 4, 4] = float("nan")
    x[1, 2, :2, :3, :3] = 7.0
    x = LAYOUTS_3D[layout](x)
    want = torch.ops.aten.adaptive_max_pool3d(x, size)
    got = pool_call(sh, "aoti_torch_cpu_adaptive_max_pool3d", x, size, results=2)
    for g, w in zip(got, want, strict=True):
        assert_same(g, w)


@pytest.mark.parametrize(
    ("op", "size", "layouts"),
    [
        ("_adaptive_avg_pool2d", [1, 1], LAYOUTS_2D),
        ("_adaptive_avg_pool2d", [3, 5], LAYOUTS_2D),  # windows of 5 and 6: overlapping
        ("_adaptive_avg_pool2d", [13, 2], LAYOUTS_2D),
        ("_adaptive_avg_pool3d", [1, 1, 1], LAYOUTS_3D),
        ("_adaptive_avg_pool3d", [2, 3, 5], LAYOUTS_3D),
    ],
)
@pytest.mark.parametrize("layout", [0, 1, 2], ids=["contiguous", "channels-last", "unbatched"])
def test_adaptive_avg_pool_matches_aten(
    sh: TorchShims, op: str, size: list[int], layouts: dict[str, Any], layout: int
) -> None:
    torch.manual_seed(9)
    x = torch.randn(2, 4, *([5] if len(size) == 3 else []), 13, 17)
    x = list(layouts.values())[layout](x)
    want = getattr(torch.ops.aten, op)(x, size)
    [got] = pool_call(sh, f"aoti_torch_cpu_{op}", x, size, results=1)
    assert_same(got, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_new_pools_take_other_float_dtypes(sh: TorchShims, dtype: torch.dtype) -> None:
    x = torch.randn(1, 3, 4, 12, 12).to(dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-2
    want = torch.ops.aten.max_pool3d_with_indices(x, [3], [2], [1], [1], False)
    got = pool_call(
        sh, "aoti_torch_cpu_max_pool3d_with_indices", x, [3], [2], [1], [1], ctypes.c_int32(0),
        results=2,
    )  # fmt: skip
    for g, w in zip(got, want, strict=True):
        assert_same(g, w, rtol=tol)
    [avg] = pool_call(sh, "aoti_torch_cpu__adaptive_avg_pool3d", x, [2, 5, 5], results=1)
    assert_same(avg, torch.ops.aten._adaptive_avg_pool3d(x, [2, 5, 5]), rtol=tol)


@pytest.mark.parametrize(
    ("name", "x", "args", "message"),
    [
        ("max_pool2d_with_indices", torch.randn(1, 2, 3, 4, 5), ([2], [], [0], [1]), "3-D or 4-D"),
        ("max_pool3d_with_indices", torch.randn(2, 3, 4), ([2], [], [0], [1]), "4-D or 5-D"),
        ("max_pool2d_with_indices", torch.randn(1, 2, 8, 8), ([3], [], [0], [0]), "positive"),
        ("max_pool2d_with_indices", torch.randn(1, 2, 8, 8), ([3], [], [2], [1]), "half"),
        ("max_pool3d_with_indices", torch.randn(1, 2, 4, 4, 4), ([2, 2], [], [0], [1]), "1 or 3"),
        ("max_pool2d_with_indices", torch.randn(1, 2, 2, 2), ([5], [1], [0], [1]), "empty"),
    ],
)
def test_max_pool_refuses_bad_arguments(
    sh: TorchShims, name: str, x: torch.Tensor, args: tuple[list[int], ...], message: str
) -> None:
    values, indices = outs(2)
    call_args: list[Any] = [sh.tensor(x)]
    for arg in args:
        call_args += [ints(*arg), ctypes.c_int64(len(arg))]
    rc = sh.call(
        f"aoti_torch_cpu_{name}", *call_args, ctypes.c_int32(0), ctypes.byref(values),
        ctypes.byref(indices),
    )  # fmt: skip
    assert rc != 0 and name in sh.error() and message in sh.error(), sh.error()


def test_adaptive_pool3d_refuses_bad_sizes(sh: TorchShims) -> None:
    x = torch.randn(1, 2, 4, 5, 5)
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu__adaptive_avg_pool3d", sh.tensor(x), ints(2, 2), ctypes.c_int64(2),
        ctypes.byref(out),
    )  # fmt: skip
    assert rc != 0 and "3 values" in sh.error()


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


@pytest.mark.parametrize("self_shape", [(4, 6), (6,), (1, 1)], ids=str)
@pytest.mark.parametrize(("beta", "alpha"), [(1.0, 1.0), (0.5, 2.0), (0.0, 1.0)])
def test_addbmm_matches_aten(
    sh: TorchShims, self_shape: tuple[int, ...], beta: float, alpha: float
) -> None:
    """addbmm: beta * self (broadcast) + alpha * the sum of the batch's products."""
    torch.manual_seed(8)
    s = torch.randn(self_shape)
    if beta == 0.0:
        s[..., 0] = float("nan")  # beta 0: self is not read (ATen's rule)
    a, b = torch.randn(3, 4, 5), torch.randn(3, 6, 5).transpose(1, 2)
    [out] = outs(1)
    rc = sh.call(
        "aoti_torch_cpu_addbmm", sh.tensor(s), sh.tensor(a), sh.tensor(b), ctypes.c_double(beta),
        ctypes.c_double(alpha), ctypes.byref(out),
    )  # fmt: skip
    assert rc == 0, sh.error()
    want = torch.addbmm(s, a, b, beta=beta, alpha=alpha)
    assert_same(sh.torch(out), want, rtol=1e-5)
    rc = sh.call(
        "aoti_torch_cpu_addbmm", sh.tensor(s), sh.tensor(a), sh.tensor(b[:2]),
        ctypes.c_double(beta), ctypes.c_double(alpha), ctypes.byref(out),
    )  # fmt: skip
    assert rc != 0 and "addbmm batch mismatch" in sh.error()
