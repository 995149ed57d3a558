"""The effective shim ABI configuration: which prefix file, and the constants it defines.

The prefix file (`shim_symbol_prefix.bzl`) is the single source of truth and
belongs to the repository that adopts shimkit; shimkit's own
`rules/shim_symbol_prefix.bzl` is the default and the example. Python never
re-types the prefix: it evaluates the real Starlark file (with starlark-pyo3)
and reads the constants it defines.

Which file (`locate_config`, first match wins; docs/cli.md):
1. an explicit path (`--config FILE`);
2. `$SHIMKIT_CONFIG`;
3. the nearest pointer walking up from the working directory: `.shimkit.toml`
   (`config = "..."`) or `pyproject.toml` (`[tool.shimkit] config = "..."`),
   the path relative to the pointer's folder;
4. the nearest `shim_symbol_prefix.bzl` walking up (in a folder or its
   `rules/` subfolder, shimkit's own layout);
5. shimkit's default: the file the installed libraries were built for.
Two different candidates at one level (a `.shimkit.toml` and a
`pyproject.toml`, or `shim_symbol_prefix.bzl` and `rules/shim_symbol_prefix.bzl`),
or a prefix file nearer than the pointer that names another one, are an
error: the user says which one wins.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import tomllib

from shimkit.errors import ShimkitError

CONFIG_FILENAME = "shim_symbol_prefix.bzl"
CONFIG_RELPATH = Path("rules") / CONFIG_FILENAME  # shimkit's own layout
CONFIG_ENV = "SHIMKIT_CONFIG"
POINTER_FILE = ".shimkit.toml"
PYPROJECT = "pyproject.toml"
_C_IDENT_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FIX = "pass --config FILE, set $SHIMKIT_CONFIG, or point at it from .shimkit.toml"


@dataclass(frozen=True)
class ConfigLocation:
    """The prefix file to read and why it was chosen (`shimkit config` prints both)."""

    path: Path
    reason: str


@dataclass(frozen=True)
class ShimConfig:
    """Values defined by the prefix file, plus where they came from."""

    prefix: str
    define: str
    families: tuple[str, ...]
    defines: tuple[str, ...]
    flags: tuple[str, ...]
    source: Path
    reason: str = "given"

    def is_family(self, name: str) -> bool:
        """True if `name` belongs to a shim family and is NOT prefixed."""
        return not name.startswith(self.prefix) and name.startswith(self.families)

    def is_prefixed_family(self, name: str) -> bool:
        """True if `name` is a prefixed shim-family name (e.g. <prefix>aoti_torch_x)."""
        return name.startswith(self.prefix) and name[len(self.prefix) :].startswith(self.families)

    def prefixed(self, name: str) -> str:
        """The private name for a shim-family `name`."""
        return self.prefix + name

    def with_prefix(self, prefix: str, reason: str) -> ShimConfig:
        """This configuration with another prefix (the derived lists follow)."""
        define = f"{self.define}={prefix}"
        return replace(
            self, prefix=prefix, defines=(define,), flags=(f"-D{define}",), reason=reason
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "prefix": self.prefix,
            "define": self.define,
            "families": list(self.families),
            "defines": list(self.defines),
            "flags": list(self.flags),
            "source": str(self.source),
            "reason": self.reason,
        }


def default_config_file() -> Path | None:
    """shimkit's own prefix file: the copy installed with the native libraries (a
    wheel), else the checkout's rules/shim_symbol_prefix.bzl (editable install)."""
    from shimkit.native import default_prefix_file

    return default_prefix_file()


def _read_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ShimkitError(f"{path}: cannot read: not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ShimkitError(f"{path}: not valid TOML: {exc}") from None


def _pointer_target(path: Path, table: dict[str, object], where: str) -> Path:
    value = table.get("config")
    if not isinstance(value, str) or not value:
        raise ShimkitError(
            f'{path}: {where} must set config = "path/to/{CONFIG_FILENAME}" '
            "(a non-empty string, relative to this file's folder)"
        )
    return path.parent / value


def _pointers_in(directory: Path) -> list[ConfigLocation]:
    """The pointers in one folder: .shimkit.toml, pyproject.toml's [tool.shimkit]."""
    found: list[ConfigLocation] = []
    dotfile = directory / POINTER_FILE
    if dotfile.is_file():
        target = _pointer_target(dotfile, _read_toml(dotfile), "it")
        found.append(ConfigLocation(target, f"config in {dotfile}"))
    pyproject = directory / PYPROJECT
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool")
        table = tool.get("shimkit") if isinstance(tool, dict) else None
        if isinstance(table, dict):
            target = _pointer_target(pyproject, table, "[tool.shimkit]")
            found.append(ConfigLocation(target, f"[tool.shimkit] config in {pyproject}"))
        elif table is not None:
            raise ShimkitError(f"{pyproject}: [tool.shimkit] must be a table")
    return found


def _prefix_files_in(directory: Path, cwd: Path) -> list[ConfigLocation]:
    reason = f"nearest {CONFIG_FILENAME} walking up from {cwd}"
    candidates = (directory / CONFIG_FILENAME, directory / CONFIG_RELPATH)
    return [ConfigLocation(c, reason) for c in candidates if c.is_file()]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except OSError:
        return a.resolve() == b.resolve()


def _one_of(candidates: list[ConfigLocation]) -> ConfigLocation:
    """The single file `candidates` (found at one level) agree on, or the error."""
    first = candidates[0]
    others = [c for c in candidates[1:] if not _same_file(c.path, first.path)]
    if others:
        listed = "; ".join(f"{c.path} ({c.reason})" for c in [first, *others])
        raise ShimkitError(
            f"two different prefix files: {listed}; keep one, or say which with {_FIX}"
        )
    return first


def _discover(cwd: Path) -> ConfigLocation | None:
    """Steps 3 and 4 of the module docstring, from `cwd` upwards."""
    nearest_file: tuple[int, ConfigLocation] | None = None
    for depth, directory in enumerate((cwd, *cwd.parents)):
        pointers = _pointers_in(directory)
        if pointers:
            chosen = _one_of(pointers)
            if nearest_file is not None and not _same_file(nearest_file[1].path, chosen.path):
                near = nearest_file[1].path
                raise ShimkitError(
                    f"two different prefix files: {near} lies nearer the cwd than "
                    f"{chosen.reason}, which names {chosen.path}; point the nearer folder at "
                    f"the one to use with a {POINTER_FILE}, or {_FIX}"
                )
            return chosen
        if nearest_file is None:
            files = _prefix_files_in(directory, cwd)
            if files:
                nearest_file = (depth, _one_of(files))
    return nearest_file[1] if nearest_file is not None else None


def locate_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    environ: dict[str, str] | os._Environ[str] | None = None,
) -> ConfigLocation:
    """Which prefix file to read, and why (see the module docstring)."""
    if explicit is not None:
        return ConfigLocation(Path(explicit), "--config")
    env = (os.environ if environ is None else environ).get(CONFIG_ENV)
    if env:
        return ConfigLocation(Path(env), f"${CONFIG_ENV}")
    here = (cwd or Path.cwd()).resolve()
    found = _discover(here)
    if found is not None:
        return found
    default = default_config_file()
    if default is not None:
        return ConfigLocation(
            default,
            f"shimkit's default (no {POINTER_FILE}, [tool.shimkit] or {CONFIG_FILENAME} "
            f"in {here} or above)",
        )
    raise ShimkitError(
        f"no prefix file: none in {here} or above, and this shimkit has no default; {_FIX}"
    )


_CONSTANTS = (
    "SHIM_SYMBOL_PREFIX",
    "SHIM_SYMBOL_PREFIX_DEFINE",
    "SHIM_SYMBOL_FAMILIES",
    "SHIM_PREFIX_DEFINES",
    "SHIM_PREFIX_FLAGS",
)


def _evaluate_bzl(path: Path) -> dict[str, object]:
    try:
        import starlark as sl  # imported lazily: only config reads need it
    except ImportError:
        raise ShimkitError(
            f"{path}: reading a prefix file needs starlark-pyo3 (pip install starlark-pyo3)"
        ) from None

    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ShimkitError(f"{path}: cannot read prefix file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ShimkitError(f"{path}: cannot read prefix file: not UTF-8 text") from None
    module = sl.Module()
    try:
        ast = sl.parse(str(path), source, sl.Dialect.standard())
        sl.eval(module, ast, sl.Globals.standard())
    except sl.StarlarkError as exc:
        raise ShimkitError(f"{path}: not valid Starlark: {_one_line(str(exc))}") from None
    values: dict[str, object] = {}
    for name in _CONSTANTS:
        try:
            value = module[name]
        except KeyError:
            continue
        if value is not None:  # starlark-pyo3 answers None for a name the file never bound
            values[name] = value
    return values


_STARLARK_LOCATION = re.compile(r"^\s*--> .*:(\d+):(\d+)\s*$")


def _one_line(report: str) -> str:
    """Condense starlark-pyo3's multi-line error report to `message (line L, column C)`."""
    lines = report.splitlines()
    message = next((ln[len("error: ") :] for ln in lines if ln.startswith("error: ")), None)
    if message is None:
        message = next((ln.strip() for ln in lines if ln.strip()), "unknown error")
    where = next((m for m in map(_STARLARK_LOCATION.match, lines) if m), None)
    if where is None:
        return message
    return f"{message} (line {where.group(1)}, column {where.group(2)})"


def _require(values: dict[str, object], path: Path, name: str, kind: type) -> object:
    if name not in values:
        raise ShimkitError(f"{path}: does not define {name}")
    value = values[name]
    if not isinstance(value, kind):
        raise ShimkitError(f"{path}: {name} must be a {kind.__name__}, got {value!r}")
    return value


def _require_list(values: dict[str, object], path: Path, name: str) -> list[object]:
    value = _require(values, path, name, list)
    assert isinstance(value, list)
    return value


def load_config(
    path: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> ShimConfig:
    """Locate the prefix file (`locate_config`), evaluate it and validate what it defines."""
    location = locate_config(path, cwd=cwd)
    source = location.path
    if not source.exists():
        raise ShimkitError(f"{source}: prefix file not found ({location.reason}); {_FIX}")
    values = _evaluate_bzl(source)
    prefix = str(_require(values, source, "SHIM_SYMBOL_PREFIX", str))
    define = str(_require(values, source, "SHIM_SYMBOL_PREFIX_DEFINE", str))
    families = _require_list(values, source, "SHIM_SYMBOL_FAMILIES")
    defines = _require_list(values, source, "SHIM_PREFIX_DEFINES")
    flags = _require_list(values, source, "SHIM_PREFIX_FLAGS")
    if not _C_IDENT_PREFIX.match(prefix):
        raise ShimkitError(
            f"{source}: SHIM_SYMBOL_PREFIX {prefix!r} is not a valid C identifier prefix"
        )
    if not _C_IDENT_PREFIX.match(define):
        raise ShimkitError(
            f"{source}: SHIM_SYMBOL_PREFIX_DEFINE {define!r} is not a valid macro name"
        )
    if not families or not all(isinstance(f, str) and f for f in families):
        raise ShimkitError(f"{source}: SHIM_SYMBOL_FAMILIES must list non-empty strings")
    # The ready-made lists must say what the prefix and the define say: build rules
    # read them directly, so a hand-edited list would compile another prefix.
    expected_defines = [f"{define}={prefix}"]
    expected_flags = [f"-D{expected_defines[0]}"]
    if defines != expected_defines:
        raise ShimkitError(
            f"{source}: SHIM_PREFIX_DEFINES is {defines!r}, but the prefix and define say "
            f'{expected_defines!r}; derive it: [SHIM_SYMBOL_PREFIX_DEFINE + "=" + '
            "SHIM_SYMBOL_PREFIX]"
        )
    if flags != expected_flags:
        raise ShimkitError(
            f"{source}: SHIM_PREFIX_FLAGS is {flags!r}, but the prefix and define say "
            f'{expected_flags!r}; derive it: ["-D" + d for d in SHIM_PREFIX_DEFINES]'
        )
    return ShimConfig(
        prefix=prefix,
        define=define,
        families=tuple(str(f) for f in families),
        defines=tuple(str(d) for d in defines),
        flags=tuple(str(f) for f in flags),
        source=source.resolve(),
        reason=location.reason,
    )
