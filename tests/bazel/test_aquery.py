"""Every compile of a shim target carries the prefix define; every `_aten` compile
carries USE_ATEN_LIB. Read from `bazel aquery --output=jsonproto` of the main
workspace (nested Bazel is not possible inside `bazel test`, so this is pytest).

Negative controls: a plain `cc_library` and the portable variants are run through
the same checks and must fail them.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from bazel_testlib import PREFIX_FILE, normalize_label, run_bazel
from shimkit.config import load_config

ATEN_FLAG = "-DUSE_ATEN_LIB"
MACROS = ("shimkit_cxx_library", "shimkit_shim_library")
PLAIN_CONTROL = "//tests/bazel:fixture_plain"


def query_generated(macro_regex: str) -> list[str]:
    proc = run_bazel(
        ["query", "--keep_going", f'attr(generator_function, "^({macro_regex})$", //...)'],
        check=False,
    )
    if proc.returncode not in (0, 3):  # 3: some other package is broken right now
        pytest.fail(f"bazel query failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    labels = (line for line in proc.stdout.split() if line.startswith(("//", "@")))
    return sorted(normalize_label(label) for label in labels)


def compile_args(targets: list[str]) -> dict[str, list[list[str]]]:
    """Target label -> the argv of each of its CppCompile actions."""
    expr = f'mnemonic("CppCompile", set({" ".join(targets)}))'
    proc = run_bazel(["aquery", "--output=jsonproto", expr])
    graph = json.loads(proc.stdout)
    labels = {t["id"]: normalize_label(t["label"]) for t in graph.get("targets", [])}
    result: dict[str, list[list[str]]] = defaultdict(list)
    for action in graph.get("actions", []):
        result[labels[action["targetId"]]].append(action["arguments"])
    return result


def missing_flag(compiles: dict[str, list[list[str]]], targets: list[str], flag: str) -> list[str]:
    """One line per compile of `targets` that lacks `flag`.

    Header-only targets have no compile and nothing to check; test_targets_found
    makes sure the known targets do have compiles.
    """
    problems = []
    for target in targets:
        for argv in compiles.get(target, []):
            if flag not in argv:
                source = next((a for a in argv if a.endswith((".cc", ".c", ".cpp"))), "?")
                problems.append(f"{target}: compile of {source} lacks {flag}")
    return problems


@pytest.fixture(scope="module")
def targets() -> dict[str, list[str]]:
    shim = query_generated("shimkit_shim_library")
    every = query_generated("|".join(MACROS))
    return {
        "shim": shim,
        "aten": [t for t in every if t.endswith("_aten")],
        "portable": [t for t in every if not t.endswith("_aten")],
    }


@pytest.fixture(scope="module")
def compiles(targets: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    every = sorted({*targets["shim"], *targets["aten"], *targets["portable"], PLAIN_CONTROL})
    return compile_args(every)


@pytest.mark.slow
def test_targets_found(targets: dict[str, list[str]], compiles: dict[str, list[list[str]]]) -> None:
    assert "//examples/basic:example_shim_lib" in targets["shim"]
    assert "//tests/bazel:fixture_shim_aten" in targets["shim"]
    assert "//tests/bazel:fixture_user_aten" in targets["aten"]
    assert "//examples/basic:example_shim_lib_control" not in targets["shim"]
    for known in ("//examples/basic:example_shim_lib", "//tests/bazel:fixture_shim_aten"):
        assert compiles.get(known), f"{known}: no CppCompile action in the aquery output"


@pytest.mark.slow
def test_every_shim_compile_has_prefix_define(
    targets: dict[str, list[str]], compiles: dict[str, list[list[str]]]
) -> None:
    flag = load_config(PREFIX_FILE).flags[0]
    assert missing_flag(compiles, targets["shim"], flag) == []


@pytest.mark.slow
def test_every_aten_compile_has_use_aten_lib(
    targets: dict[str, list[str]], compiles: dict[str, list[list[str]]]
) -> None:
    assert missing_flag(compiles, targets["aten"], ATEN_FLAG) == []


@pytest.mark.slow
def test_negative_control_plain_library_fails_both_checks(
    compiles: dict[str, list[list[str]]],
) -> None:
    flag = load_config(PREFIX_FILE).flags[0]
    for wanted in (flag, ATEN_FLAG):
        problems = missing_flag(compiles, [PLAIN_CONTROL], wanted)
        source = "tests/bazel/fixtures/plain.cc"
        assert problems == [f"{PLAIN_CONTROL}: compile of {source} lacks {wanted}"]


@pytest.mark.slow
def test_negative_control_portable_variants_lack_use_aten_lib(
    targets: dict[str, list[str]], compiles: dict[str, list[list[str]]]
) -> None:
    problems = missing_flag(compiles, targets["portable"], ATEN_FLAG)
    every_compile = sum(len(compiles.get(t, [])) for t in targets["portable"])
    assert len(problems) == every_compile > 0


def test_missing_flag_reports_each_compile_without_the_flag() -> None:
    compiles = {"//a:b": [["gcc", "-DX", "-c", "b1.cc"], ["gcc", "-c", "b2.cc"]], "//a:h": []}
    expected = ["//a:b: compile of b2.cc lacks -DX"]
    assert missing_flag(compiles, ["//a:b", "//a:h"], "-DX") == expected
