"""Baseline helpers: stable relative locations, diff semantics, strict parsing."""

from __future__ import annotations

from pathlib import Path

import pytest
from shimkit.errors import ShimkitError
from shimkit.gate.baseline import ArtifactState, diff, load_baseline, relative_location

HASH_A = "c" + "a1" * 25 + "b"
HASH_B = "c" + "z9" * 25 + "q"


def test_relative_location_and_blob_hash_placeholder(tmp_path: Path) -> None:
    root = tmp_path
    pt2 = f"{root}/models/m.pt2!m/data/aotinductor/model/{HASH_A}.wrapper.so"
    again = f"{root}/models/m.pt2!m/data/aotinductor/model/{HASH_B}.wrapper.so"
    assert relative_location(pt2, root) == "models/m.pt2!m/data/aotinductor/model/{hash}.wrapper.so"
    assert relative_location(pt2, root) == relative_location(again, root)
    assert relative_location(f"{root}/out/{HASH_A}.so", root) == "out/{hash}.so"
    # controls: ordinary names, short names and paths outside the root stay as they are
    assert relative_location(f"{root}/out/libc10x.so", root) == "out/libc10x.so"
    assert relative_location("/elsewhere/cab.so", root) == "/elsewhere/cab.so"
    assert relative_location(f"{root}/a.pte!elf@0x10", root) == "a.pte!elf@0x10"


def test_diff_semantics() -> None:
    old = {
        "a.so": ArtifactState("a.so", {"x_imp"}, set(), {("SK001", "x_imp")}),
        "b.so": ArtifactState("b.so"),
    }
    new = {
        "a.so": ArtifactState("a.so", {"y_imp"}, set(), set()),
        "c.so": ArtifactState("c.so"),
    }
    drifts = {d.path: d for d in diff(old, new)}
    assert drifts["a.so"].added_imports == ["y_imp"] and drifts["a.so"].fails
    assert drifts["a.so"].removed_violations == [("SK001", "x_imp")]
    assert drifts["b.so"].status == "gone" and drifts["b.so"].fails
    assert drifts["c.so"].status == "new" and not drifts["c.so"].fails  # nothing shim-related
    same = {"a.so": ArtifactState("a.so", {"x_imp"})}
    assert diff(same, {"a.so": ArtifactState("a.so", {"x_imp"})}) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "not a shimkit.baseline/v1"),
        ('{"schema": "shimkit.baseline/v1"}', "'artifacts' must be a list"),
        (
            '{"schema": "shimkit.baseline/v1", "artifacts": [{"imports": []}]}',
            "needs a string 'path'",
        ),
        (
            '{"schema": "shimkit.baseline/v1", "artifacts": [{"path": "a", "imports": [1]}]}',
            "must be a list of strings",
        ),
        (
            '{"schema": "shimkit.baseline/v1", "artifacts": [{"path": "a", "violations": [{}]}]}',
            "each needs string 'rule' and 'symbol'",
        ),
        ("{", "not valid JSON"),
    ],
)
def test_strict_parsing(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(ShimkitError, match=message) as info:
        load_baseline(path)
    assert str(path) in str(info.value)
