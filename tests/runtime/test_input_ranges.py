"""Dynamic dims' ranges read from the wrapper's input checks (torch 2.13's lines for a
batch exported as Dim("batch", max=64)), and the one-line error for a size outside them,
before the blob runs."""

from __future__ import annotations

import pytest
from shimkit.errors import ShimkitError
from shimkit.runtime.blob import InputSpec, _input_specs, check_input_spec

WRAPPER = """
static void check_input_0(AtenTensorHandle* input_handles) {
    int32_t arg6_1_expected_dtype = aoti_torch_dtype_float32();
    auto arg6_1_size = arg6_1.sizes();
    if (arg6_1_size[0] < 2) {
        ss << "input_handles[0]: dim value is too small at 0, "
    if (arg6_1_size[0] > 64) {
        ss << "input_handles[0]: dim value is too large at 0, "
    if (8 != arg6_1_size[1]) {
}
static void check_input_1(AtenTensorHandle* input_handles) {
    int32_t arg7_1_expected_dtype = aoti_torch_dtype_int64();
    auto arg7_1_size = arg7_1.sizes();
    if (arg7_1_size[1] < 3) {
}
"""


def test_ranges_of_dynamic_dims() -> None:
    batch, tokens = _input_specs(WRAPPER) or ()
    assert batch.shape == (None, 8) and batch.ranges == ((0, 2, 64),)
    assert tokens.shape == (None, None) and tokens.ranges == ((1, 3, None),)


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        (65, "size 65 at dim 0, where the package takes 2 to 64 (the range torch.export gave"),
        (1, "size 1 at dim 0, where the package takes 2 to 64 (torch.export compiles a dynamic"),
        (0, "size 0 at dim 0"),
    ],
)
def test_size_outside_the_range_is_one_line(rows: int, words: str) -> None:
    [batch, _] = _input_specs(WRAPPER) or ()
    with pytest.raises(ShimkitError) as caught:
        check_input_spec("float32", (rows, 8), batch, 0)
    assert str(caught.value).startswith("input 0: " + words)


def test_sizes_inside_the_range_pass() -> None:
    [batch, tokens] = _input_specs(WRAPPER) or ()
    for rows in (2, 17, 64):
        check_input_spec("float32", (rows, 8), batch, 0)
    check_input_spec("int64", (1, 3), tokens, 1)
    check_input_spec("int64", (1, 4000), tokens, 1)  # no upper bound
    with pytest.raises(ShimkitError, match="takes 3 to any "):
        check_input_spec("int64", (1, 2), tokens, 1)
    # Control: a spec without ranges takes any size of a dynamic dim.
    check_input_spec("float32", (1, 8), InputSpec("float32", (None, 8)), 0)
