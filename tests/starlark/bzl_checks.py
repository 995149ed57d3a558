"""Properties of rules/defs.bzl, as functions that raise AssertionError when one breaks.

The tests run every check against the real defs.bzl (must pass) and against mutated
copies of it (must fail): each property has a negative control that breaks it in the
macro source itself. Values of the prefix are read from shim_symbol_prefix.bzl through
the same evaluator; `USE_ATEN_LIB` and the `_aten` suffix are the documented contract,
typed here on purpose so a changed constant in defs.bzl is caught.
"""

from __future__ import annotations

import json

from bzl_harness import BAZEL, BzlError, FakeBuild, RuleCall, StarlarkFail

DEFS = "//rules:defs.bzl"
PREFIX_BZL = "//rules:shim_symbol_prefix.bzl"
ATEN_DEFINE = "USE_ATEN_LIB"
LOAD = f'load("{DEFS}", "shimkit_cxx_library", "shimkit_shim_library")\n'


def build(world: FakeBuild, body: str, package: str = "pkg") -> dict[str, RuleCall]:
    """Evaluate a BUILD file that loads the macros; return the package's targets."""
    world.run_build(LOAD + body, package)
    return world.targets(package)


def expect_fail(world: FakeBuild, body: str, *needles: str, package: str = "pkg") -> str:
    """The BUILD must fail in the macro itself (not in the back-end) with all `needles`."""
    try:
        build(world, body, package)
    except StarlarkFail as exc:
        for needle in needles:
            assert needle in exc.message, f"{needle!r} not in fail message {exc.message!r}"
        return exc.message
    except BzlError as exc:  # the back-end (or Starlark itself) stopped it, not the macro
        raise AssertionError(f"expected the macro to fail(), got: {exc}") from None
    raise AssertionError(f"no fail() from the macro for:\n{body}")


def expect_kind(world: FakeBuild) -> str:
    return "cc_library" if world.backend == BAZEL else "cxx_library"


# -- views that hide the back-end's spelling ------------------------------------------


def _d_flags(flags: list[str]) -> list[str]:
    return [f[2:] for f in flags if f.startswith("-D")]


def private_defines(world: FakeBuild, call: RuleCall) -> list[str]:
    if world.backend == BAZEL:
        return list(call.get("local_defines", []))
    return _d_flags(call.get("preprocessor_flags", []))


def exported_defines(world: FakeBuild, call: RuleCall) -> list[str]:
    if world.backend == BAZEL:
        return list(call.get("defines", []))
    return _d_flags(call.get("exported_preprocessor_flags", []))


def links_whole(world: FakeBuild, call: RuleCall) -> bool:
    return bool(call.get("alwayslink" if world.backend == BAZEL else "link_whole", False))


def all_deps(world: FakeBuild, call: RuleCall) -> list[str]:
    if world.backend == BAZEL:
        return list(call.get("deps", []))
    return list(call.get("deps", [])) + list(call.get("exported_deps", []))


def prefix_defines(world: FakeBuild) -> list[str]:
    return list(world.symbol(PREFIX_BZL, "SHIM_PREFIX_DEFINES"))


# -- properties -----------------------------------------------------------------------


def check_aten_modes(world: FakeBuild) -> None:
    """portable -> name, aten -> name_aten, both -> both; all of the back-end's kind."""
    targets = build(
        world,
        'shimkit_cxx_library(name = "p", srcs = ["p.c"])\n'
        'shimkit_cxx_library(name = "a", srcs = ["a.c"], aten_mode = "aten")\n'
        'shimkit_cxx_library(name = "b", srcs = ["b.c"], aten_mode = "both")\n',
    )
    assert sorted(targets) == ["a_aten", "b", "b_aten", "p"], sorted(targets)
    assert {t.kind for t in targets.values()} == {expect_kind(world)}
    for name, target in targets.items():
        assert target.get("srcs") == [name[0] + ".c"], (name, target.get("srcs"))


def check_bad_aten_mode(world: FakeBuild) -> None:
    expect_fail(world, 'shimkit_cxx_library(name = "t", aten_mode = "ATen")\n', '"t"', "aten_mode")


def check_link_whole(world: FakeBuild) -> None:
    targets = build(
        world,
        'shimkit_cxx_library(name = "w", srcs = ["w.c"], link_whole = True)\n'
        'shimkit_cxx_library(name = "n", srcs = ["n.c"])\n',
    )
    assert links_whole(world, targets["w"]), targets["w"].attrs
    assert not links_whole(world, targets["n"]), targets["n"].attrs


def check_define_routing(world: FakeBuild) -> None:
    """Private -D -> local_defines, exported -D -> defines, other flags -> copts (Bazel)."""
    t = build(
        world,
        "shimkit_cxx_library(\n"
        '    name = "f",\n'
        '    srcs = ["f.c"],\n'
        '    preprocessor_flags = ["-DPRIV=1", "-D", "SPLIT", "-Iprivinc"],\n'
        '    exported_preprocessor_flags = ["-DPUB", "-include", "pub.h"],\n'
        '    compiler_flags = ["-O3", "-fno-exceptions"],\n'
        '    linker_flags = ["-Wl,--gc-sections"],\n'
        ")\n",
    )["f"]
    if world.backend != BAZEL:  # Buck2 takes every list verbatim
        assert t.get("preprocessor_flags") == ["-DPRIV=1", "-D", "SPLIT", "-Iprivinc"]
        assert t.get("exported_preprocessor_flags") == ["-DPUB", "-include", "pub.h"]
        assert t.get("compiler_flags") == ["-O3", "-fno-exceptions"]
        assert t.get("linker_flags") == ["-Wl,--gc-sections"]
        return
    assert sorted(t.get("local_defines")) == ["PRIV=1", "SPLIT"], t.attrs
    assert t.get("defines") == ["PUB"], t.attrs
    copts = t.get("copts")
    for flag in ("-Iprivinc", "-include", "pub.h", "-O3", "-fno-exceptions"):
        assert flag in copts, (flag, copts)
    assert not [f for f in copts if f.startswith("-D") or f in ("PRIV=1", "SPLIT", "PUB")], copts
    assert copts.index("-include") + 1 == copts.index("pub.h"), copts
    assert t.get("linkopts") == ["-Wl,--gc-sections"], t.attrs


def check_headers_and_deps(world: FakeBuild) -> None:
    t = build(
        world,
        'shimkit_cxx_library(name = "h", srcs = ["h.c"], headers = ["priv.h"],\n'
        '    exported_headers = ["pub.h"], deps = ["//a:b"], exported_deps = ["//c:d"])\n',
    )["h"]
    if world.backend == BAZEL:
        assert sorted(t.get("hdrs")) == ["priv.h", "pub.h"], t.attrs
        assert sorted(t.get("deps")) == ["//a:b", "//c:d"], t.attrs
    else:
        assert t.get("headers") == ["priv.h"] and t.get("exported_headers") == ["pub.h"]
        assert t.get("deps") == ["//a:b"] and t.get("exported_deps") == ["//c:d"]


def check_aten_defines(world: FakeBuild) -> None:
    """The twin has USE_ATEN_LIB privately and exported; the portable variant has none."""
    targets = build(
        world,
        'shimkit_cxx_library(name = "x", srcs = ["x.c"], aten_mode = "both",\n'
        '    preprocessor_flags = ["-DMINE"], exported_preprocessor_flags = ["-DTHEIRS"])\n',
    )
    twin, portable = targets["x_aten"], targets["x"]
    assert ATEN_DEFINE in private_defines(world, twin), twin.attrs
    assert ATEN_DEFINE in exported_defines(world, twin), twin.attrs
    assert "MINE" in private_defines(world, twin) and "THEIRS" in exported_defines(world, twin)
    assert ATEN_DEFINE not in private_defines(world, portable), portable.attrs
    assert ATEN_DEFINE not in exported_defines(world, portable), portable.attrs
    assert twin.get("srcs") == portable.get("srcs") == ["x.c"]


def check_dep_mapping(world: FakeBuild) -> None:
    """:x, //pkg:x, //pkg and @repo//pkg:x map to twins; aten_neutral_deps stay as they are."""
    deps = [":local", "//other:lib", "//other/sub", "@ext//third:party", "//neutral:dep"]
    targets = build(
        world,
        'shimkit_cxx_library(name = "local", srcs = ["l.c"], aten_mode = "both")\n'
        'shimkit_cxx_library(name = "user", srcs = ["u.c"], aten_mode = "both",\n'
        f"    deps = {json.dumps(deps[:3])}, exported_deps = {json.dumps(deps[3:])},\n"
        '    aten_neutral_deps = ["//neutral:dep"])\n',
    )
    expected = [
        ":local_aten",
        "//other:lib_aten",
        "//other/sub:sub_aten",
        "@ext//third:party_aten",
        "//neutral:dep",
    ]
    assert sorted(all_deps(world, targets["user_aten"])) == sorted(expected), targets[
        "user_aten"
    ].attrs
    assert sorted(all_deps(world, targets["user"])) == sorted(deps), targets["user"].attrs
    if world.backend != BAZEL:  # exported stays exported in the twin
        assert targets["user_aten"].get("exported_deps") == expected[3:]


def check_missing_twin(world: FakeBuild) -> None:
    """A same-package dep with no declared twin fails, naming the target and the fix."""
    message = expect_fail(
        world,
        'shimkit_cxx_library(name = "base", srcs = ["b.c"])\n'
        'shimkit_cxx_library(name = "top", srcs = ["t.c"], aten_mode = "both", deps = [":base"])\n',
        '"top"',
        ":base",
    )
    assert "aten_neutral_deps" in message or "aten_mode" in message, message
    # Control: the same BUILD with the twin declared evaluates.
    fresh = FakeBuild(world.backend, root=world.root, overrides=world.overrides)
    targets = build(
        fresh,
        'shimkit_cxx_library(name = "base", srcs = ["b.c"], aten_mode = "both")\n'
        'shimkit_cxx_library(name = "top", srcs = ["t.c"], aten_mode = "both", deps = [":base"])\n',
    )
    assert all_deps(fresh, targets["top_aten"]) == [":base_aten"]


def check_unknown_attribute(world: FakeBuild) -> None:
    """An attribute the macro does not know fails in the macro, naming the target."""
    for macro in ("shimkit_cxx_library", "shimkit_shim_library"):
        expect_fail(
            world, f'{macro}(name = "odd", srcs = ["o.c"], copts = ["-O2"])\n', '"odd"', "copts"
        )
        expect_fail(world, f'{macro}(name = "odd2", hdrs = ["o.h"])\n', '"odd2"', "hdrs")
    # Control: an allow-listed common attribute passes through.
    targets = build(
        world, 'shimkit_cxx_library(name = "ok", visibility = ["//visibility:public"])\n'
    )
    assert targets["ok"].get("visibility") == ["//visibility:public"]


def check_shim_library(world: FakeBuild) -> None:
    """Prefix define in both lists and whole-archive linking; a plain library has neither."""
    want = prefix_defines(world)
    targets = build(
        world,
        'shimkit_shim_library(name = "shims", srcs = ["s.c"], aten_mode = "both")\n'
        'shimkit_cxx_library(name = "plain", srcs = ["p.c"])\n',
    )
    for name in ("shims", "shims_aten"):
        t = targets[name]
        for d in want:
            assert d in private_defines(world, t), (name, t.attrs)
            assert d in exported_defines(world, t), (name, t.attrs)
        assert links_whole(world, t), (name, t.attrs)
    assert ATEN_DEFINE in private_defines(world, targets["shims_aten"])
    plain = targets["plain"]
    assert not set(want) & set(private_defines(world, plain) + exported_defines(world, plain))
    assert not links_whole(world, plain)


def check_shim_link_whole_forced(world: FakeBuild) -> None:
    expect_fail(
        world, 'shimkit_shim_library(name = "s", link_whole = False)\n', '"s"', "link_whole"
    )


def check_prefix_validated(world: FakeBuild) -> None:
    """Only meaningful for a world whose shim_symbol_prefix.bzl has an invalid prefix."""
    expect_fail(
        world,
        'shimkit_shim_library(name = "bad_shims", srcs = ["s.c"])\n',
        '"bad_shims"',
        "not a valid C identifier prefix",
    )
