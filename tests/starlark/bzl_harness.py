"""Evaluate the real rules/*.bzl files with starlark-pyo3 against a recording fake build.

A `FakeBuild` plays one back-end: Bazel (`native.cc_library`, `native.existing_rule`, ...)
or Buck2's prelude (`native.cxx_library`, `native.rule_exists`, ...). It resolves
`load()` labels from the repository, injects a `native` struct whose functions are Python
callables that record every rule call, and replaces `fail` with a recorder, so a test can
tell a macro's own load-time error (`StarlarkFail`) from a call the fake back-end rejects
(`BackendRejected`, e.g. an attribute `cc_library` does not have) and from any other
Starlark error (`BzlError`).

The fakes check what the real back-ends check at load time: attribute names, attribute
types, positional arguments, duplicate target names. Nothing else is simulated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import starlark as sl

REPO_ROOT = Path(__file__).resolve().parents[2]

# Repository names under which a .bzl may refer to this repository itself.
SELF_REPOS = frozenset({"", "shimkit"})

# External repositories (Buck2: cells) the fakes can load from: name -> directory, relative
# to the evaluated tree's root or absolute. rules_cc: this checkout's offline stub, the one
# the WORKSPACE points Bazel 4.2.3 at (it forwards to `native`, i.e. to the recording fakes).
# shimkit_config: the directory holding the prefix file, as `shimkit_config()` /
# `shimkit.config` (Bazel) or a cell (Buck2) provide it; the tree's own rules/ by default.
DEFAULT_REPOS: Mapping[str, str] = {
    "rules_cc": str(REPO_ROOT / "third_party" / "rules_cc_stub"),
    "shimkit_config": "rules",
}

_PACKAGE_ARGS = {
    "default_visibility",
    "default_testonly",
    "default_deprecation",
    "default_applicable_licenses",
    "default_package_metadata",
    "features",
    "licenses",
}

BAZEL = "bazel"
BUCK2 = "buck2"
BACKENDS = (BAZEL, BUCK2)


class BzlError(Exception):
    """A Starlark error that is neither a `fail()` nor a back-end rejection."""


class StarlarkFail(BzlError):
    """The evaluated Starlark code called `fail(...)`; `.message` is what it said."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(f"fail: {message}\n{detail}")
        self.message = message


class BackendRejected(BzlError):
    """The fake back-end rejected a rule call the way the real one would."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(f"{message}\n{detail}")
        self.message = message


@dataclass(frozen=True)
class RuleCall:
    """One recorded rule instantiation."""

    kind: str
    package: str
    name: str
    attrs: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f"//{self.package}:{self.name}"

    def get(self, attr: str, default: Any = None) -> Any:
        return self.attrs.get(attr, default)


# ---------------------------------------------------------------------------------------
# Attribute schemas of the rules the fakes know. Types: "str", "bool", "int",
# "str_list", "str_dict", "headers" (Buck2: list or dict of str), "any".

_COMMON_BAZEL = {
    "name": "str",
    "visibility": "str_list",
    "tags": "str_list",
    "testonly": "bool",
    "features": "str_list",
    "deprecation": "str",
    "licenses": "str_list",
    "compatible_with": "str_list",
    "restricted_to": "str_list",
    "target_compatible_with": "str_list",
    "exec_compatible_with": "str_list",
    "exec_properties": "str_dict",
    "toolchains": "str_list",
    "applicable_licenses": "str_list",
    "package_metadata": "str_list",
    "aspect_hints": "str_list",
}

_BAZEL_CC = {
    **_COMMON_BAZEL,
    "srcs": "str_list",
    "hdrs": "str_list",
    "textual_hdrs": "str_list",
    "deps": "str_list",
    "implementation_deps": "str_list",
    "data": "str_list",
    "copts": "str_list",
    "conlyopts": "str_list",
    "cxxopts": "str_list",
    "defines": "str_list",
    "local_defines": "str_list",
    "includes": "str_list",
    "include_prefix": "str",
    "strip_include_prefix": "str",
    "linkopts": "str_list",
    "linkstatic": "bool",
    "alwayslink": "bool",
    "additional_linker_inputs": "str_list",
    "additional_compiler_inputs": "str_list",
    "win_def_file": "str",
    "linkstamp": "str",
}

_BAZEL_RULES: dict[str, dict[str, str]] = {
    "cc_library": _BAZEL_CC,
    "cc_binary": {
        **{k: v for k, v in _BAZEL_CC.items() if k not in ("hdrs", "textual_hdrs")},
        "linkshared": "bool",
        "args": "str_list",
        "env": "str_dict",
        "malloc": "str",
        "stamp": "int",
        "dynamic_deps": "str_list",
    },
    "cc_test": {
        **{k: v for k, v in _BAZEL_CC.items() if k not in ("hdrs", "textual_hdrs")},
        "args": "str_list",
        "env": "str_dict",
        "size": "str",
        "timeout": "str",
        "flaky": "bool",
        "shard_count": "int",
        "local": "bool",
        "malloc": "str",
        "linkshared": "bool",
    },
    "sh_test": {
        **_COMMON_BAZEL,
        "srcs": "str_list",
        "deps": "str_list",
        "data": "str_list",
        "args": "str_list",
        "env": "str_dict",
        "size": "str",
        "timeout": "str",
        "flaky": "bool",
        "local": "bool",
    },
    "cc_import": {
        **_COMMON_BAZEL,
        "hdrs": "str_list",
        "includes": "str_list",
        "shared_library": "str",
        "static_library": "str",
        "interface_library": "str",
        "alwayslink": "bool",
        "system_provided": "bool",
        "deps": "str_list",
        "linkopts": "str_list",
    },
    "filegroup": {**_COMMON_BAZEL, "srcs": "str_list", "data": "str_list", "output_group": "str"},
    "genrule": {
        **_COMMON_BAZEL,
        "srcs": "str_list",
        "outs": "str_list",
        "cmd": "str",
        "cmd_bash": "str",
        "tools": "str_list",
        "exec_tools": "str_list",
        "message": "str",
        "output_to_bindir": "bool",
        "local": "bool",
        "stamp": "bool",
    },
    "alias": {**_COMMON_BAZEL, "actual": "str"},
    "py_test": {
        **_COMMON_BAZEL,
        "srcs": "str_list",
        "deps": "str_list",
        "data": "str_list",
        "args": "str_list",
        "env": "str_dict",
        "main": "str",
        "imports": "str_list",
        "python_version": "str",
        "srcs_version": "str",
        "size": "str",
        "timeout": "str",
        "flaky": "bool",
        "local": "bool",
    },
    "test_suite": {**_COMMON_BAZEL, "tests": "str_list"},
}

_COMMON_BUCK2 = {
    "name": "str",
    "visibility": "str_list",
    "within_view": "str_list",
    "labels": "str_list",
    "licenses": "str_list",
    "contacts": "str_list",
    "default_target_platform": "str",
    "default_host_platform": "str",
    "target_compatible_with": "str_list",
    "compatible_with": "str_list",
    "exec_compatible_with": "str_list",
    "tests": "str_list",
    "metadata": "any",
    "modifiers": "any",
}

_BUCK2_CXX = {
    **_COMMON_BUCK2,
    "srcs": "str_list",
    "headers": "headers",
    "exported_headers": "headers",
    "raw_headers": "str_list",
    "header_namespace": "str",
    "include_directories": "str_list",
    "public_include_directories": "str_list",
    "public_system_include_directories": "str_list",
    "deps": "str_list",
    "exported_deps": "str_list",
    "platform_deps": "any",
    "exported_platform_deps": "any",
    "preprocessor_flags": "str_list",
    "exported_preprocessor_flags": "str_list",
    "lang_preprocessor_flags": "any",
    "exported_lang_preprocessor_flags": "any",
    "platform_preprocessor_flags": "any",
    "exported_platform_preprocessor_flags": "any",
    "compiler_flags": "str_list",
    "lang_compiler_flags": "any",
    "platform_compiler_flags": "any",
    "linker_flags": "str_list",
    "exported_linker_flags": "str_list",
    "post_linker_flags": "str_list",
    "exported_post_linker_flags": "str_list",
    "platform_linker_flags": "any",
    "link_whole": "bool",
    "link_style": "str",
    "preferred_linkage": "str",
    "force_static": "bool",
    "soname": "str",
    "header_only": "bool",
    "reexport_all_header_dependencies": "bool",
    "supported_platforms_regex": "str",
    "frameworks": "str_list",
    "libraries": "str_list",
    "prefix_header": "str",
    "precompiled_header": "str",
    "resources": "any",
}

_BUCK2_RULES: dict[str, dict[str, str]] = {
    "cxx_library": _BUCK2_CXX,
    "cxx_binary": {
        **{k: v for k, v in _BUCK2_CXX.items() if not k.startswith("exported_")},
        "link_style": "str",
    },
    "cxx_test": {
        **{k: v for k, v in _BUCK2_CXX.items() if not k.startswith("exported_")},
        "env": "str_dict",
        "args": "str_list",
    },
    "genrule": {
        **_COMMON_BUCK2,
        "srcs": "str_list",
        "out": "str",
        "outs": "any",
        "cmd": "str",
        "bash": "str",
    },
    "filegroup": {**_COMMON_BUCK2, "srcs": "str_list"},
    "alias": {**_COMMON_BUCK2, "actual": "str"},
    "sh_test": {**_COMMON_BUCK2, "test": "str", "args": "str_list", "env": "str_dict"},
    "export_file": {**_COMMON_BUCK2, "src": "str", "mode": "str"},
}

_REPO = re.compile(r"[\w.~+-]*")
_PACKAGE = re.compile(r"([\w.+-]+(/[\w.+-]+)*)?")
_BZL_NAME = re.compile(r"[\w.+-]+(/[\w.+-]+)*\.bzl")
_TARGET_NAME = re.compile(r"[A-Za-z0-9_.+=,@~/()\-]+\Z")


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "any":
        return True
    if value is None:  # both back-ends treat None as "use the default"
        return True
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "str_dict":
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    if kind == "headers":
        return _type_ok("str_list", value) or _type_ok("str_dict", value)
    raise AssertionError(f"unknown attribute type {kind}")


@dataclass
class _Backend:
    name: str
    rules: dict[str, dict[str, str]]
    helpers: tuple[str, ...]


_BACKENDS = {
    BAZEL: _Backend(
        BAZEL,
        _BAZEL_RULES,
        (
            "existing_rule",
            "existing_rules",
            "package_name",
            "repository_name",
            "glob",
            "exports_files",
        ),
    ),
    BUCK2: _Backend(
        BUCK2,
        _BUCK2_RULES,
        ("rule_exists", "package_name", "glob", "read_config"),
    ),
}


@dataclass
class FakeBuild:
    """One back-end's view of the repository: loads .bzl files, records rule calls.

    `overrides` maps repository-relative .bzl paths to replacement file contents (used
    to evaluate the real rules against, e.g., a modified shim_symbol_prefix.bzl).
    `repos` maps external repository names to directories of this repository.
    `config` is what `native.read_config` (Buck2) answers, keyed by (section, key).
    """

    backend: str
    root: Path = REPO_ROOT
    overrides: Mapping[str, str] = field(default_factory=dict)
    repos: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_REPOS))
    config: Mapping[tuple[str, str], str] = field(default_factory=dict)
    calls: list[RuleCall] = field(default_factory=list, init=False)
    loaded: dict[str, sl.FrozenModule] = field(default_factory=dict, init=False, repr=False)
    # Evaluation state: the BUILD package being evaluated and what stopped the last eval.
    _package: str = field(default="", init=False, repr=False)
    _failure: tuple[str, ...] = field(default=(), init=False, repr=False)
    _rejection: str | None = field(default=None, init=False, repr=False)
    _pending: BzlError | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"unknown back-end {self.backend!r}")
        self._spec = _BACKENDS[self.backend]
        self._dialect = sl.Dialect.extended()
        self._dialect.enable_load = True
        self._dialect.enable_load_reexport = False  # like Bazel: no re-export of loads
        self._globals = sl.Globals.extended_by(
            [sl.LibraryExtension.StructType, sl.LibraryExtension.Print, sl.LibraryExtension.Json]
        )

    # -- public API ---------------------------------------------------------------------

    def run_build_file(self, relpath: str) -> list[RuleCall]:
        """Evaluate a real BUILD file of this repository (e.g. examples/basic/BUILD.bazel)."""
        path = self.root / relpath
        package = Path(relpath).parent.as_posix()
        return self.run_build(path.read_text(encoding="utf-8"), "" if package == "." else package)

    def run_build(self, source: str, package: str = "pkg") -> list[RuleCall]:
        """Evaluate `source` as the BUILD/BUCK file of `package`; return its rule calls."""
        start = len(self.calls)
        self._package = package
        module = sl.Module()
        self._install(module, build_file=True)
        filename = f"{package}/{'BUILD.bazel' if self.backend == BAZEL else 'BUCK'}"
        self._eval(module, filename, source, package)
        return self.calls[start:]

    def load(self, label: str, from_package: str = "") -> sl.FrozenModule:
        """Load a .bzl by label (as `load()` would) and return its frozen module."""
        relpath = self.resolve(label, from_package)
        if relpath in self.loaded:
            return self.loaded[relpath]
        if relpath in self.overrides:
            source = self.overrides[relpath]
        else:
            path = self.root / relpath
            if not path.is_file():
                raise BzlError(f"load({label!r}): no file {relpath} under {self.root}")
            source = path.read_text(encoding="utf-8")
        module = sl.Module()
        self._install(module, build_file=False)
        parent = Path(relpath).parent
        package = "" if parent == Path(".") else parent.as_posix()
        self._eval(module, relpath, source, package)
        frozen = module.freeze()
        self.loaded[relpath] = frozen
        return frozen

    def symbol(self, label: str, name: str) -> Any:
        """The value `name` exported by the .bzl at `label` (must be JSON-like)."""
        module = sl.Module()
        source = f"load({json.dumps(label)}, _loaded = {json.dumps(name)})\nvalue = _loaded\n"
        self._eval(module, "<symbol>", source, "")
        return module["value"]

    def call(self, label: str, function: str, *args: Any) -> Any:
        """Call `function` (`name` or `struct_name.field`) from the .bzl at `label`.

        Arguments are JSON-like; the call runs as if in a BUILD file of package `pkg`.
        """
        module = sl.Module()
        self._install(module, build_file=True)
        arglist = ", ".join(json.dumps(a) for a in args)
        symbol, _, attr = function.partition(".")
        target = f"_f.{attr}" if attr else "_f"
        source = (
            f"load({json.dumps(label)}, _f = {json.dumps(symbol)})\nvalue = {target}({arglist})\n"
        )
        self._package = "pkg"
        self._eval(module, "pkg/<call>", source, "pkg")
        return module["value"]

    def resolve(self, label: str, from_package: str = "") -> str:
        """Path (relative to `root`, or absolute) of a .bzl label: this tree or one of `repos`.

        Forms: `:f.bzl` (relative), `//pkg:f.bzl`, `@repo//pkg:f.bzl`, `@@repo//...`
        (Bazel) and `cell//pkg:f.bzl` (Buck2 cells; same repository names).
        """
        if not label.endswith(".bzl"):
            raise BzlError(f"load({label!r}): not a .bzl label")
        if "//" not in label:
            if not label.startswith(":") or not _BZL_NAME.fullmatch(label[1:]):
                raise BzlError(f"load({label!r}): relative labels must look like ':file.bzl'")
            return f"{from_package}/{label[1:]}" if from_package else label[1:]
        repo_part, rest = label.split("//", 1)
        repo = repo_part.lstrip("@")
        if repo_part.startswith("@") != (repo_part != repo) or not _REPO.fullmatch(repo):
            raise BzlError(f"load({label!r}): bad repository name {repo_part!r}")
        package, colon, name = rest.partition(":")
        if not colon or not _PACKAGE.fullmatch(package) or not _BZL_NAME.fullmatch(name):
            raise BzlError(f"load({label!r}): expected //package:file.bzl")
        base = ""
        if repo not in SELF_REPOS:
            if repo not in self.repos:
                raise BzlError(f"load({label!r}): repository {repo!r} is not available here")
            base = self.repos[repo]
        parts = [p for p in (base, package, name) if p]
        return "/".join(parts)

    def targets(self, package: str = "pkg") -> dict[str, RuleCall]:
        """Recorded rules of `package` by name."""
        return {c.name: c for c in self.calls if c.package == package}

    # -- internals ----------------------------------------------------------------------

    def _eval(self, module: sl.Module, filename: str, source: str, package: str) -> None:
        self._failure = ()
        self._rejection = None
        self._pending = None

        def load(label: str) -> sl.FrozenModule:
            try:
                return self.load(label, package)
            except BzlError as exc:  # surfaces in the loading file as a generic error
                self._pending = exc
                raise

        try:
            ast = sl.parse(filename, source, self._dialect)
            sl.eval(module, ast, self._globals, sl.FileLoader(load))
        except sl.StarlarkError as exc:
            detail = str(exc)
            if self._pending is not None:
                pending, self._pending = self._pending, None
                raise pending from None
            if self._failure:
                message = " ".join(self._failure)
                self._failure = ()
                raise StarlarkFail(message, detail) from None
            if self._rejection is not None:
                message, self._rejection = self._rejection, None
                raise BackendRejected(message, detail) from None
            raise BzlError(detail) from None

    def _install(self, module: sl.Module, build_file: bool) -> None:
        module.add_callable("fail", self._fail)
        names = []
        for kind in self._spec.rules:
            fn = self._rule_function(kind)
            module.add_callable(f"_fake_native_{kind}", fn)
            if build_file:  # BUILD/BUCK files see rules as globals, .bzl files via native
                module.add_callable(kind, fn)
            names.append(kind)
        for helper in self._spec.helpers:
            fn = getattr(self, f"_h_{helper}")
            module.add_callable(f"_fake_native_{helper}", fn)
            if build_file and self.backend == BAZEL:  # BUILD globals in Bazel, too
                module.add_callable(helper, fn)
            names.append(helper)
        if build_file and self.backend == BAZEL:
            module.add_callable("package", self._h_package)
        if not build_file:
            fields = ", ".join(f"{n} = _fake_native_{n}" for n in names)
            prelude = sl.parse("<fake native>", f"native = struct({fields})\n", self._dialect)
            sl.eval(module, prelude, self._globals)

    def _fail(self, *args: Any, attr: str | None = None, sep: str = " ") -> None:
        message = sep.join(str(a) for a in args)
        if attr is not None:
            message = f"attribute {attr}: {message}"
        self._failure = (message,)
        raise RuntimeError(message)

    def _reject(self, message: str) -> None:
        self._rejection = message
        raise RuntimeError(message)

    def _rule_function(self, kind: str) -> Callable[..., None]:
        schema = self._spec.rules[kind]

        def rule(*args: Any, **attrs: Any) -> None:
            where = f"{kind}() in //{self._package}"
            if args:
                self._reject(f"{where}: rules take keyword arguments only, got {args!r}")
            name = attrs.get("name")
            if not isinstance(name, str) or not _TARGET_NAME.match(name):
                self._reject(f"{where}: invalid or missing name {name!r}")
            for attr, value in attrs.items():
                if attr not in schema:
                    self._reject(f"{where} {name!r}: no such attribute {attr!r}")
                if not _type_ok(schema[attr], value):
                    self._reject(
                        f"{where} {name!r}: attribute {attr!r} expects {schema[attr]}, "
                        f"got {value!r}"
                    )
            if name in self.targets(self._package):
                self._reject(f"{where}: duplicate target name {name!r}")
            self.calls.append(RuleCall(kind, self._package, name, dict(attrs)))

        rule.__name__ = kind
        return rule

    # Bazel helpers
    def _h_existing_rule(self, name: str) -> dict[str, Any] | None:
        call = self.targets(self._package).get(name)
        if call is None:
            return None
        return {**call.attrs, "name": call.name, "kind": call.kind}

    def _h_existing_rules(self) -> dict[str, dict[str, Any]]:
        return {
            n: {**c.attrs, "name": n, "kind": c.kind}
            for n, c in self.targets(self._package).items()
        }

    def _h_package_name(self) -> str:
        return self._package

    def _h_repository_name(self) -> str:
        return "@"

    def _h_glob(self, include: list[str], exclude: list[str] | None = None, **_: Any) -> list[str]:
        base = self.root / self._package
        found: set[str] = set()
        for pattern in include:
            found.update(str(p.relative_to(base)) for p in base.glob(pattern) if p.is_file())
        for pattern in exclude or []:
            found.difference_update(str(p.relative_to(base)) for p in base.glob(pattern))
        return sorted(found)

    def _h_exports_files(
        self, srcs: list[str], visibility: list[str] | None = None, licenses: Any = None
    ) -> None:
        if not isinstance(srcs, list) or not all(isinstance(s, str) for s in srcs):
            self._reject(f"exports_files() in //{self._package}: srcs must be a list of strings")

    def _h_package(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - _PACKAGE_ARGS)
        if unknown:
            self._reject(f"package() in //{self._package}: no such argument {unknown[0]!r}")

    # Buck2 helpers
    def _h_rule_exists(self, name: str) -> bool:
        return name in self.targets(self._package)

    def _h_read_config(self, section: str, key: str, default: Any = None) -> Any:
        return self.config.get((section, key), default)
