"""shimkit.escape: the fast path for names that need no escaping changes nothing."""

from __future__ import annotations

from shimkit.escape import lossless, lossless_tree, restore


def test_plain_names_come_back_unchanged() -> None:
    names = [f"executorch_aoti_torch_op_{i}" for i in range(1000)]
    assert lossless_tree(names) == names
    assert lossless_tree({"exports": names}) == {"exports": names}


def test_one_name_needing_escape_among_many_is_escaped() -> None:
    # Negative control of the one-pass check: a single backslash or undecodable byte in a
    # long list must still be escaped, and only that name changes.
    names = ["a"] * 500 + ["odd\\name", "byte\udc80"] + ["b"] * 500
    escaped = lossless_tree(names)
    assert isinstance(escaped, list)
    assert escaped[500:502] == ["odd\\\\name", "byte\\x80"]
    assert escaped[:500] == names[:500] and escaped[502:] == names[502:]
    assert [restore(n) for n in escaped] == names


def test_non_ascii_text_that_is_valid_unicode_is_kept() -> None:
    assert lossless("naïve_ü") == "naïve_ü"
    assert lossless_tree(["ok", 3, None, "é"]) == ["ok", 3, None, "é"]
