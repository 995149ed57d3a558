"""Public C/C++ macros of shimkit, with Buck-style attribute names.

One file serves Bazel 4.x, Bazel 7+ and Buck2. Under Bazel the macros declare
`cc_library` from rules_cc (`@rules_cc//cc:defs.bzl`; Bazel 9 has no native
C++ rules); under Buck2 `native.cxx_library` (it exists only there, which is how
the back-end is picked at load time). Under Bazel the Buck names are mapped:

| Buck name                     | Bazel attribute                                 |
|-------------------------------|-------------------------------------------------|
| `headers`, `exported_headers` | `hdrs`                                          |
| `deps`, `exported_deps`       | `deps`                                          |
| `preprocessor_flags`          | `-D` entries -> `local_defines`, rest -> `copts` |
| `exported_preprocessor_flags` | `-D` entries -> `defines`, rest -> `copts`      |
| `compiler_flags`              | `copts`                                         |
| `linker_flags`                | `linkopts`                                      |
| `link_whole`                  | `alwayslink`                                    |

The shim prefix is read from `@shimkit_config//:shim_symbol_prefix.bzl`: a copy
of the consumer's prefix file (the `shimkit` module extension or the
`shimkit_config` WORKSPACE macro; default: shimkit's rules/shim_symbol_prefix.bzl).
Under Buck2, `shimkit_config` is a cell holding that file. The constants are
re-exported here, so BUILD files load everything from this file.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load(
    "@shimkit_config//:shim_symbol_prefix.bzl",
    _SHIM_PREFIX_DEFINES = "SHIM_PREFIX_DEFINES",
    _SHIM_PREFIX_FLAGS = "SHIM_PREFIX_FLAGS",
    _SHIM_SYMBOL_FAMILIES = "SHIM_SYMBOL_FAMILIES",
    _SHIM_SYMBOL_PREFIX = "SHIM_SYMBOL_PREFIX",
    _SHIM_SYMBOL_PREFIX_DEFINE = "SHIM_SYMBOL_PREFIX_DEFINE",
)

# Re-exports of the single source of truth (the consumer's prefix file).
SHIM_SYMBOL_PREFIX = _SHIM_SYMBOL_PREFIX
SHIM_SYMBOL_PREFIX_DEFINE = _SHIM_SYMBOL_PREFIX_DEFINE
SHIM_SYMBOL_FAMILIES = _SHIM_SYMBOL_FAMILIES
SHIM_PREFIX_DEFINES = _SHIM_PREFIX_DEFINES
SHIM_PREFIX_FLAGS = _SHIM_PREFIX_FLAGS

# The macro every `_aten` variant defines, in both preprocessor lists.
ATEN_DEFINE = "USE_ATEN_LIB"
ATEN_FLAG = "-D" + ATEN_DEFINE

# Suffix of the ATen twin of a target.
ATEN_SUFFIX = "_aten"

# Accepted values of `aten_mode`.
ATEN_MODES = ["portable", "aten", "both"]

# The Buck-style attributes every macro takes.
_BUCK_ATTRS = [
    "srcs",
    "headers",
    "exported_headers",
    "deps",
    "exported_deps",
    "preprocessor_flags",
    "exported_preprocessor_flags",
    "compiler_flags",
    "linker_flags",
    "link_whole",
]

# Attributes passed through unchanged (besides the Buck-style ones).
COMMON_ATTRS = [
    "visibility",
    "tags",
    "testonly",
    "features",
    "target_compatible_with",
    "includes",
    "include_prefix",
    "strip_include_prefix",
]

# Buck2 spellings of the common attributes; None: no Buck2 equivalent.
_BUCK2_COMMON = {
    "features": None,
    "include_prefix": "header_namespace",
    "includes": "public_include_directories",
    "strip_include_prefix": None,
    "tags": "labels",
    "target_compatible_with": "target_compatible_with",
    "testonly": None,
    "visibility": "visibility",
}

_IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_IDENT_CHARS = _IDENT_START + "0123456789"

def _is_buck2():
    return hasattr(native, "cxx_library")

def _macro_id(kind, name):
    return '%s(name = "%s")' % (kind, name)

def _prefix_error(kind, name, prefix):
    """Returns a message if `prefix` cannot start a C identifier, else None."""
    ok = type(prefix) == "string" and len(prefix) > 0 and prefix[0] in _IDENT_START
    if ok:
        for i in range(1, len(prefix)):
            if prefix[i] not in _IDENT_CHARS:
                ok = False
                break
    if ok:
        return None
    return (
        "%s: SHIM_SYMBOL_PREFIX %r is not a valid C identifier prefix " +
        "([A-Za-z_][A-Za-z0-9_]*); fix it in the prefix file (shimkit.config / " +
        "shimkit_config(prefix_file = ...), default rules/shim_symbol_prefix.bzl)"
    ) % (_macro_id(kind, name), prefix)

def _unknown_attr_error(kind, name, common):
    """Returns a message naming the first attribute not in COMMON_ATTRS, else None."""
    for key in sorted(common.keys()):
        if key not in COMMON_ATTRS:
            hint = "; use compiler_flags instead of copts" if key == "copts" else ""
            return '%s: unknown attribute "%s"; allowed: %s%s' % (
                _macro_id(kind, name),
                key,
                ", ".join(_BUCK_ATTRS + ["aten_mode", "aten_neutral_deps"] + COMMON_ATTRS),
                hint,
            )
    return None

def aten_twin(label):
    """Returns the label of the ATen twin of `label` (its `_aten` variant).

    `:x` -> `:x_aten`, `x` -> `x_aten`, `//pkg:x` -> `//pkg:x_aten`,
    `//pkg` -> `//pkg:pkg_aten`, `@r//pkg:x` -> `@r//pkg:x_aten`,
    `@r` -> `@r//:r_aten`. Buck2 cell labels (`cell//pkg:x`) work the same.

    Args:
      label: a dependency label, as a string.

    Returns:
      The twin's label, as a string.
    """
    if type(label) != "string" or not label:
        fail("aten_twin: expected a non-empty label string, got %r" % (label,))
    if "//" in label:
        repo, _, rest = label.partition("//")
        if ":" in rest:
            pkg, _, target = rest.partition(":")
        else:
            pkg = rest
            target = rest.split("/")[-1]
        if not target:
            fail("aten_twin: cannot derive a target name from %r; write it as %s//:name" % (label, repo))
        return "%s//%s:%s%s" % (repo, pkg, target, ATEN_SUFFIX)
    if label.startswith("@"):
        return "%s//:%s%s" % (label, label[1:], ATEN_SUFFIX)
    return label + ATEN_SUFFIX

def _same_package_name(label):
    """The target name of a same-package label (`:x` or `x`), else None."""
    if "//" in label or label.startswith("@"):
        return None
    return label[1:] if label.startswith(":") else label

def _rule_exists(name):
    if hasattr(native, "existing_rule"):
        return native.existing_rule(name) != None
    if hasattr(native, "rule_exists"):
        return native.rule_exists(name)
    return True

def _aten_deps(kind, name, deps, neutral, attr_name):
    """Maps `deps` to their twins, keeping `neutral` ones; fails on a missing twin."""
    if type(deps) != "list":
        fail("%s: %s must be a plain list when an _aten variant is built (select() cannot be mapped to twins)" % (_macro_id(kind, name), attr_name))
    out = []
    for dep in deps:
        if dep in neutral:
            out.append(dep)
            continue
        twin = aten_twin(dep)
        local = _same_package_name(dep)
        if local != None and not _rule_exists(local + ATEN_SUFFIX):
            fail(
                ('%s: %s entry "%s" has no ATen twin "%s" in this package; declare "%s" ' +
                 'before this target with aten_mode = "both" (or "aten"), or list "%s" in ' +
                 "aten_neutral_deps if it does not depend on the ATen mode") %
                (_macro_id(kind, name), attr_name, dep, twin, local, dep),
            )
        out.append(twin)
    return out

def _split_defines(flags):
    """Splits compiler flags into (names defined by -D, other flags)."""
    defines = []
    others = []
    pending = False
    for flag in flags:
        if pending:
            defines.append(flag)
            pending = False
        elif flag == "-D":
            pending = True
        elif flag.startswith("-D"):
            defines.append(flag[2:])
        else:
            others.append(flag)
    if pending:
        fail("a trailing -D has no macro after it in %r" % (flags,))
    return defines, others

def _bazel_attrs(spec, kind = "shimkit_cxx_library"):
    """The Bazel cc_library attributes for a Buck-style `spec` dict."""
    for key in ("preprocessor_flags", "exported_preprocessor_flags"):
        if type(spec[key]) != "list":
            fail("%s: %s must be a plain list under Bazel (its -D entries are sorted into defines at load time); put select() in compiler_flags instead" % (_macro_id(kind, spec["name"]), key))
    local_defines, private_other = _split_defines(spec["preprocessor_flags"])
    defines, exported_other = _split_defines(spec["exported_preprocessor_flags"])
    attrs = dict(spec["common"])
    attrs.update(
        name = spec["name"],
        srcs = spec["srcs"],
        hdrs = spec["headers"] + spec["exported_headers"],
        deps = spec["deps"] + spec["exported_deps"],
        local_defines = local_defines,
        defines = defines,
        copts = private_other + exported_other + spec["compiler_flags"],
        linkopts = spec["linker_flags"],
        alwayslink = spec["link_whole"],
    )
    return attrs

def _buck2_attrs(kind, spec):
    """The native.cxx_library attributes for a Buck-style `spec` dict."""
    attrs = {}
    for key, value in spec["common"].items():
        buck_name = _BUCK2_COMMON[key]
        if buck_name == None:
            fail('%s: attribute "%s" has no Buck2 equivalent; drop it for Buck2 builds' % (_macro_id(kind, spec["name"]), key))
        attrs[buck_name] = value
    for key in _BUCK_ATTRS:
        attrs[key] = spec[key]
    attrs["name"] = spec["name"]
    return attrs

def _with_flags(flags, extra):
    """`flags` plus the entries of `extra` it does not already contain."""
    if type(flags) != "list":
        return flags + extra
    return flags + [f for f in extra if f not in flags]

def _declare(kind, spec):
    if _is_buck2():
        native.cxx_library(**_buck2_attrs(kind, spec))
    else:
        cc_library(**_bazel_attrs(spec, kind))

def _cxx_library(
        kind,
        name,
        srcs,
        headers,
        exported_headers,
        deps,
        exported_deps,
        preprocessor_flags,
        exported_preprocessor_flags,
        compiler_flags,
        linker_flags,
        link_whole,
        aten_mode,
        aten_neutral_deps,
        common):
    error = _unknown_attr_error(kind, name, common)
    if error:
        fail(error)
    if aten_mode not in ATEN_MODES:
        fail('%s: aten_mode = %r is not one of "portable", "aten", "both"' % (_macro_id(kind, name), aten_mode))
    if type(link_whole) != "bool":
        fail("%s: link_whole must be True or False, got %r" % (_macro_id(kind, name), link_whole))
    neutral = list(aten_neutral_deps)
    for dep in neutral:
        if type(deps) != "list" or type(exported_deps) != "list":
            break  # select(): cannot be searched; _aten_deps reports it if it matters
        if dep in deps or dep in exported_deps:
            continue
        fail('%s: aten_neutral_deps entry "%s" is not in deps or exported_deps (labels must match exactly)' % (_macro_id(kind, name), dep))
    spec = dict(
        name = name,
        srcs = srcs,
        headers = headers,
        exported_headers = exported_headers,
        deps = deps,
        exported_deps = exported_deps,
        preprocessor_flags = preprocessor_flags,
        exported_preprocessor_flags = exported_preprocessor_flags,
        compiler_flags = compiler_flags,
        linker_flags = linker_flags,
        link_whole = link_whole,
        common = common,
    )
    aten = None
    if aten_mode in ("aten", "both"):
        # Computed (and validated) before anything is declared, so a misuse
        # leaves no half-declared targets behind.
        aten = dict(spec)
        aten.update(
            name = name + ATEN_SUFFIX,
            deps = _aten_deps(kind, name, deps, neutral, "deps"),
            exported_deps = _aten_deps(kind, name, exported_deps, neutral, "exported_deps"),
            preprocessor_flags = _with_flags(preprocessor_flags, [ATEN_FLAG]),
            exported_preprocessor_flags = _with_flags(exported_preprocessor_flags, [ATEN_FLAG]),
        )
    if aten_mode in ("portable", "both"):
        _declare(kind, spec)
    if aten:
        _declare(kind, aten)

def shimkit_cxx_library(
        name,
        srcs = [],
        headers = [],
        exported_headers = [],
        deps = [],
        exported_deps = [],
        preprocessor_flags = [],
        exported_preprocessor_flags = [],
        compiler_flags = [],
        linker_flags = [],
        link_whole = False,
        aten_mode = "portable",
        aten_neutral_deps = [],
        **common):
    """A C/C++ library with Buck-style attributes and optional ATen variant.

    Under Bazel this declares rules_cc `cc_library` targets (see the module
    docstring for the attribute mapping); under Buck2 `native.cxx_library`.
    The `_aten` variant has the same sources, `-DUSE_ATEN_LIB` in both
    preprocessor lists, and every dep replaced by its ATen twin (see
    `aten_twin`), except those listed in `aten_neutral_deps`.

    Args:
      name: target name of the portable variant; the ATen variant is
        `name + "_aten"`.
      srcs: C/C++ sources.
      headers: headers of this library (Bazel: `hdrs`).
      exported_headers: headers for dependents (Bazel: `hdrs`).
      deps: dependencies.
      exported_deps: dependencies re-exported to dependents (Bazel: `deps`).
      preprocessor_flags: flags for this target's own compiles; `-DX` and
        `-D X` go to Bazel `local_defines`, anything else to `copts`.
      exported_preprocessor_flags: flags that dependents see as well; `-DX`
        goes to Bazel `defines` (propagated), anything else to `copts`.
      compiler_flags: other compiler flags (Bazel: `copts`).
      linker_flags: linker flags (Bazel: `linkopts`).
      link_whole: keep every object of the library in links, even with
        unreferenced symbols (Bazel: `alwayslink`).
      aten_mode: "portable" declares `name`; "aten" declares only
        `name + "_aten"`; "both" declares both.
      aten_neutral_deps: labels from `deps`/`exported_deps` that stay as
        they are in the ATen variant (they do not depend on the mode).
      **common: only visibility, tags, testonly, features,
        target_compatible_with, includes, include_prefix and
        strip_include_prefix; anything else fails at load time.
    """
    _cxx_library(
        "shimkit_cxx_library",
        name,
        srcs,
        headers,
        exported_headers,
        deps,
        exported_deps,
        preprocessor_flags,
        exported_preprocessor_flags,
        compiler_flags,
        linker_flags,
        link_whole,
        aten_mode,
        aten_neutral_deps,
        common,
    )

def shimkit_shim_library(
        name,
        srcs = [],
        headers = [],
        exported_headers = [],
        deps = [],
        exported_deps = [],
        preprocessor_flags = [],
        exported_preprocessor_flags = [],
        compiler_flags = [],
        linker_flags = [],
        link_whole = True,
        aten_mode = "portable",
        aten_neutral_deps = [],
        **common):
    """A shim library: `shimkit_cxx_library` that always links whole and renames.

    Adds `SHIM_PREFIX_FLAGS` (`-D<SHIM_SYMBOL_PREFIX_DEFINE>=<prefix>`) to
    both `preprocessor_flags` and `exported_preprocessor_flags`, so the
    library's own definitions and every includer see the same renamed
    names, and sets `link_whole` so a `linkshared` binary built with
    `-Wl,--gc-sections` still exports every shim. Fails at load time if the
    prefix in the prefix file cannot start a C identifier.

    Args:
      name: target name (see `shimkit_cxx_library`).
      srcs: C/C++ sources defining the shim functions.
      headers: headers of this library.
      exported_headers: headers for dependents.
      deps: dependencies (typically the rename header, `//shims:rename_header`).
      exported_deps: dependencies re-exported to dependents.
      preprocessor_flags: extra private flags; the prefix flags are added.
      exported_preprocessor_flags: extra exported flags; the prefix flags are
        added.
      compiler_flags: other compiler flags.
      linker_flags: linker flags.
      link_whole: must stay True (a shim library always links whole);
        False fails at load time.
      aten_mode: "portable", "aten" or "both" (see `shimkit_cxx_library`).
      aten_neutral_deps: deps kept as they are in the ATen variant.
      **common: the attributes `shimkit_cxx_library` accepts.
    """
    kind = "shimkit_shim_library"
    error = _prefix_error(kind, name, SHIM_SYMBOL_PREFIX)
    if error:
        fail(error)
    if link_whole != True:
        fail("%s: link_whole = %r; a shim library always links whole: remove link_whole, or use shimkit_cxx_library for a control" % (_macro_id(kind, name), link_whole))
    _cxx_library(
        kind,
        name,
        srcs,
        headers,
        exported_headers,
        deps,
        exported_deps,
        _with_flags(preprocessor_flags, SHIM_PREFIX_FLAGS),
        _with_flags(exported_preprocessor_flags, SHIM_PREFIX_FLAGS),
        compiler_flags,
        linker_flags,
        True,
        aten_mode,
        aten_neutral_deps,
        common,
    )

# Pure helpers for tests (skylib unittest); not a stable API.
shimkit_internal = struct(
    bazel_attrs = _bazel_attrs,
    prefix_error = _prefix_error,
    split_defines = _split_defines,
    unknown_attr_error = _unknown_attr_error,
)
