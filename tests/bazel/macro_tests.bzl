"""Skylib unit and analysis tests for the macros in //rules:defs.bzl.

Analysis tests read the attributes the macros gave the generated
`cc_library` targets through an aspect (Bazel 4.2.3's analysistest cannot
read CppCompile argv), and the propagated `CcInfo` defines of a dependent.
Unit tests call the pure helpers behind the macros, including the messages
they fail with, since a load-time `fail()` cannot be caught in Starlark
(tests/bazel/test_load_errors.py checks those failures on real Bazel).
"""

load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts", "unittest")
load(
    "//rules:defs.bzl",
    "ATEN_DEFINE",
    "SHIM_PREFIX_DEFINES",
    "SHIM_PREFIX_FLAGS",
    "SHIM_SYMBOL_PREFIX",
    "aten_twin",
    "shimkit_internal",
)

MacroAttrsInfo = provider(
    doc = "Attributes of a C++ rule target, as the macro set them.",
    fields = [
        "kind",
        "alwayslink",
        "defines",
        "local_defines",
        "copts",
        "linkopts",
        "deps",
        "hdrs",
    ],
)

# Where this file's own repository lives in the execroot: "" as the main
# repository, "external/shimkit..." when shimkit is a dependency (BCR presubmit).
_OWN_WORKSPACE_ROOT = Label("//tests/bazel:BUILD.bazel").workspace_root

def normalize_label(label):
    """`//p:t` for a label of shimkit's own repository, whatever it is called.

    Bazel 4.x prints main-repository labels as `//p:t`, 7.x as `@@//p:t`, and
    both print `@shimkit//p:t` / `@@shimkit~//p:t` when shimkit is a dependency.

    Args:
      label: a Label.

    Returns:
      `//package:name` for shimkit's labels, else the label as a string.
    """
    if label.workspace_root == _OWN_WORKSPACE_ROOT:
        return "//%s:%s" % (label.package, label.name)
    return str(label)

def _macro_attrs_aspect_impl(target, ctx):
    _ignore = target  # buildifier: disable=unused-variable
    attr = ctx.rule.attr
    return [MacroAttrsInfo(
        kind = ctx.rule.kind,
        alwayslink = getattr(attr, "alwayslink", None),
        defines = list(getattr(attr, "defines", [])),
        local_defines = list(getattr(attr, "local_defines", [])),
        copts = list(getattr(attr, "copts", [])),
        linkopts = list(getattr(attr, "linkopts", [])),
        deps = [normalize_label(d.label) for d in getattr(attr, "deps", [])],
        hdrs = [normalize_label(h.label) for h in getattr(attr, "hdrs", [])],
    )]

macro_attrs_aspect = aspect(
    implementation = _macro_attrs_aspect_impl,
    doc = "Collects the attributes of a cc_library into MacroAttrsInfo.",
)

_SUBJECT = {"subject": attr.label(aspects = [macro_attrs_aspect])}

def _subject(ctx):
    return ctx.attr.subject[MacroAttrsInfo]

# --- analysis tests ---------------------------------------------------------

def _shim_library_test_impl(ctx):
    env = analysistest.begin(ctx)
    info = _subject(ctx)
    asserts.equals(env, "cc_library", info.kind)
    asserts.true(env, info.alwayslink, "a shim library must set alwayslink")
    for define in SHIM_PREFIX_DEFINES:
        asserts.true(env, define in info.local_defines, "prefix define missing from local_defines: %s" % info.local_defines)
        asserts.true(env, define in info.defines, "prefix define missing from defines: %s" % info.defines)
    asserts.false(env, ATEN_DEFINE in info.defines, "portable variant must not define " + ATEN_DEFINE)
    asserts.equals(env, ["-fvisibility=hidden"], info.copts)
    return analysistest.end(env)

shim_library_test = analysistest.make(_shim_library_test_impl, attrs = _SUBJECT)

def _shim_library_aten_test_impl(ctx):
    env = analysistest.begin(ctx)
    info = _subject(ctx)
    asserts.true(env, info.alwayslink, "the ATen shim variant must set alwayslink")
    for define in SHIM_PREFIX_DEFINES + [ATEN_DEFINE]:
        asserts.true(env, define in info.local_defines, "%s missing from local_defines: %s" % (define, info.local_defines))
        asserts.true(env, define in info.defines, "%s missing from defines: %s" % (define, info.defines))

    # The rename header is listed in aten_neutral_deps: it stays as it is.
    asserts.equals(env, ["//shims:rename_header"], info.deps)
    return analysistest.end(env)

shim_library_aten_test = analysistest.make(_shim_library_aten_test_impl, attrs = _SUBJECT)

def _cxx_library_test_impl(ctx):
    env = analysistest.begin(ctx)
    info = _subject(ctx)
    asserts.false(env, info.alwayslink, "link_whole defaults to False")
    asserts.equals(env, ["SHIMKIT_FIXTURE_PRIVATE"], info.local_defines)
    asserts.equals(env, ["SHIMKIT_FIXTURE_EXPORTED=1"], info.defines)

    # Non -D preprocessor flags (private, then exported) precede compiler_flags.
    asserts.equals(env, ["-UNDEBUG", "-Wall"], info.copts)
    asserts.equals(env, ["-lm"], info.linkopts)
    asserts.equals(env, ["//tests/bazel:fixtures/mode.h"], info.hdrs)
    return analysistest.end(env)

cxx_library_test = analysistest.make(_cxx_library_test_impl, attrs = _SUBJECT)

def _aten_twin_deps_test_impl(ctx):
    env = analysistest.begin(ctx)
    info = _subject(ctx)
    asserts.equals(env, [ATEN_DEFINE], info.local_defines)
    asserts.equals(env, [ATEN_DEFINE], info.defines)

    # deps then exported_deps; :fixture_base mapped, the neutral dep kept.
    asserts.equals(env, ["//tests/bazel:fixture_base_aten", "//tests/bazel:fixture_plain"], info.deps)
    return analysistest.end(env)

aten_twin_deps_test = analysistest.make(_aten_twin_deps_test_impl, attrs = _SUBJECT)

def _portable_deps_test_impl(ctx):
    env = analysistest.begin(ctx)
    info = _subject(ctx)
    asserts.equals(env, [], info.local_defines)
    asserts.equals(env, [], info.defines)
    asserts.equals(env, ["//tests/bazel:fixture_base", "//tests/bazel:fixture_plain"], info.deps)
    return analysistest.end(env)

portable_deps_test = analysistest.make(_portable_deps_test_impl, attrs = _SUBJECT)

def _propagation_test_impl(ctx):
    """A dependent sees exported defines (prefix, USE_ATEN_LIB) but not local ones."""
    env = analysistest.begin(ctx)
    target = analysistest.target_under_test(env)
    defines = target[CcInfo].compilation_context.defines.to_list()  # buildifier: disable=native-cc-info
    for define in ctx.attr.expect_defines:
        asserts.true(env, define in defines, "%s not propagated: %s" % (define, defines))
    for define in ctx.attr.reject_defines:
        asserts.false(env, define in defines, "%s must not propagate: %s" % (define, defines))
    return analysistest.end(env)

propagation_test = analysistest.make(
    _propagation_test_impl,
    attrs = {
        "expect_defines": attr.string_list(),
        "reject_defines": attr.string_list(),
    },
)

# --- targets created (recorded at load time) --------------------------------

def _targets_created_test_impl(ctx):
    env = unittest.begin(ctx)
    asserts.equals(env, [], ctx.attr.missing, "targets the macros should have declared")
    asserts.equals(env, [], ctx.attr.unexpected, "targets the macros should not have declared")
    return unittest.end(env)

_targets_created_test = unittest.make(
    _targets_created_test_impl,
    attrs = {
        "missing": attr.string_list(),
        "unexpected": attr.string_list(),
    },
)

def targets_created_test(name, present, absent):
    """Checks, at load time, which targets the macros above it declared.

    Args:
      name: test target name.
      present: target names that must exist in this package.
      absent: target names that must not exist.
    """
    _targets_created_test(
        name = name,
        missing = [t for t in present if native.existing_rule(t) == None],
        unexpected = [t for t in absent if native.existing_rule(t) != None],
    )

# --- unit tests of the pure helpers ------------------------------------------

def _aten_twin_test_impl(ctx):
    env = unittest.begin(ctx)
    cases = {
        ":x": ":x_aten",
        "x": "x_aten",
        "//pkg:x": "//pkg:x_aten",
        "//pkg": "//pkg:pkg_aten",
        "//a/b": "//a/b:b_aten",
        "//:x": "//:x_aten",
        "@r//pkg:x": "@r//pkg:x_aten",
        "@r//pkg": "@r//pkg:pkg_aten",
        "@r": "@r//:r_aten",
        "cell//pkg:x": "cell//pkg:x_aten",
    }
    for label, twin in cases.items():
        asserts.equals(env, twin, aten_twin(label), "aten_twin(%r)" % label)
    return unittest.end(env)

aten_twin_test = unittest.make(_aten_twin_test_impl)

def _split_defines_test_impl(ctx):
    env = unittest.begin(ctx)
    split = shimkit_internal.split_defines
    asserts.equals(env, (["A", "B=1", "C"], ["-UX", "-Iinc"]), split(["-DA", "-UX", "-DB=1", "-D", "C", "-Iinc"]))
    asserts.equals(env, ([], []), split([]))
    asserts.equals(env, (SHIM_PREFIX_DEFINES, []), split(SHIM_PREFIX_FLAGS))
    return unittest.end(env)

split_defines_test = unittest.make(_split_defines_test_impl)

def _prefix_error_test_impl(ctx):
    env = unittest.begin(ctx)
    check = shimkit_internal.prefix_error

    # Positive: the configured prefix and other valid ones pass.
    for good in [SHIM_SYMBOL_PREFIX, "a", "_x9_", "Z"]:
        asserts.equals(env, None, check("shimkit_shim_library", "t", good), "prefix %r" % good)

    # Negative: each bad prefix yields a message naming the target and the fix.
    for bad in ["", "9lives_", "has-dash_", "sp ace_", "dot.", "ü_"]:
        message = check("shimkit_shim_library", "t", bad)
        asserts.true(env, message != None, "prefix %r must be rejected" % bad)
        if message:
            asserts.true(env, message.startswith('shimkit_shim_library(name = "t"): '), message)
            asserts.true(env, "rules/shim_symbol_prefix.bzl" in message, message)
    return unittest.end(env)

prefix_error_test = unittest.make(_prefix_error_test_impl)

def _unknown_attr_error_test_impl(ctx):
    env = unittest.begin(ctx)
    check = shimkit_internal.unknown_attr_error
    asserts.equals(env, None, check("shimkit_cxx_library", "x", {"visibility": [], "tags": []}))
    message = check("shimkit_cxx_library", "x", {"foo": 1, "visibility": []})
    asserts.true(env, message != None and message.startswith(
        'shimkit_cxx_library(name = "x"): unknown attribute "foo"; allowed: ',
    ), str(message))
    message = check("shimkit_cxx_library", "x", {"copts": []})
    asserts.true(env, message != None and "use compiler_flags" in message, str(message))
    return unittest.end(env)

unknown_attr_error_test = unittest.make(_unknown_attr_error_test_impl)

def _bazel_attrs_test_impl(ctx):
    env = unittest.begin(ctx)
    attrs = shimkit_internal.bazel_attrs(dict(
        name = "t",
        srcs = ["a.cc"],
        headers = ["p.h"],
        exported_headers = ["e.h"],
        deps = [":d"],
        exported_deps = [":e"],
        preprocessor_flags = ["-DLOCAL", "-isystem", "inc"],
        exported_preprocessor_flags = ["-DPUB=2"],
        compiler_flags = ["-O2"],
        linker_flags = ["-ldl"],
        link_whole = True,
        common = {"visibility": ["//visibility:public"]},
    ))
    asserts.equals(env, dict(
        name = "t",
        srcs = ["a.cc"],
        hdrs = ["p.h", "e.h"],
        deps = [":d", ":e"],
        local_defines = ["LOCAL"],
        defines = ["PUB=2"],
        copts = ["-isystem", "inc", "-O2"],
        linkopts = ["-ldl"],
        alwayslink = True,
        visibility = ["//visibility:public"],
    ), attrs)
    return unittest.end(env)

bazel_attrs_test = unittest.make(_bazel_attrs_test_impl)

def macro_unit_test_suite(name):
    """Declares the unit tests of the pure helpers as one test_suite.

    Args:
      name: name of the test_suite.
    """
    unittest.suite(
        name,
        aten_twin_test,
        split_defines_test,
        prefix_error_test,
        unknown_attr_error_test,
        bazel_attrs_test,
    )
