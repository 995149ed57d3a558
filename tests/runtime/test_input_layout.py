"""Inputs laid out as the blob was compiled for them: the memory order read from the
wrapper's input stride checks, and the copy into that order."""

from __future__ import annotations

import numpy as np
import pytest
from shimkit.runtime.blob import _input_specs, _memory_order, dense_in_order

WRAPPER = """
    inputs_info_[0].name = "arg3_1";
    inputs_info_[1].name = "arg4_1";
static void check_input_0(AtenTensorHandle* input_handles) {
    int32_t arg3_1_expected_dtype = aoti_torch_dtype_float32();
    if (2 != arg3_1_size[0]) {
    if (3 != arg3_1_size[1]) {
    if (4 != arg3_1_size[2]) {
    if (5 != arg3_1_size[3]) {
}
static void check_input_1(AtenTensorHandle* input_handles) {
    int32_t arg4_1_expected_dtype = aoti_torch_dtype_float32();
    if (2 != arg4_1_size[0]) {
    if (3 != arg4_1_size[1]) {
}
    if (check) { assert_size_stride(arg3_1, {2L, 3L, 4L, 5L}, {60L, 1L, 15L, 3L}, "input"); }
    if (check) { assert_size_stride(arg4_1, {2L, 3L}, {3L, 1L}, "input"); }
"""


def test_wrapper_strides_give_each_inputs_memory_order() -> None:
    channels_last, row_major = _input_specs(WRAPPER) or ()
    assert channels_last.shape == (2, 3, 4, 5) and channels_last.order == (0, 2, 3, 1)
    assert row_major.shape == (2, 3) and row_major.order is None


@pytest.mark.parametrize(
    ("strides", "order"),
    [
        ("60L, 1L, 15L, 3L", (0, 2, 3, 1)),  # channels_last
        ("360L, 1L, 72L, 12L, 4L", (0, 2, 3, 4, 1)),  # channels_last_3d
        ("20L, 5L, 1L", None),  # row-major
        ("s0*12L, 1L, 3L", None),  # dynamic: not known, row-major assumed
        ("4L, 4L, 1L", None),  # a size-1 dim ties: the earlier one is outer
    ],
)
def test_memory_order(strides: str, order: tuple[int, ...] | None) -> None:
    assert _memory_order(strides) == order


def test_dense_in_order_copies_only_when_the_layout_differs() -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    laid_out = dense_in_order(x, (0, 2, 3, 1))
    np.testing.assert_array_equal(laid_out, x)
    assert laid_out.strides == (240, 4, 60, 12)  # channels_last, in bytes
    assert dense_in_order(laid_out, (0, 2, 3, 1)) is laid_out  # already so: no copy
    assert dense_in_order(x, (0, 1, 2, 3)) is x
