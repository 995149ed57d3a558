"""The effective shim ABI configuration, read from `rules/shim_symbol_prefix.bzl`.

The .bzl file is the single source of truth. Python never re-types the
prefix: it evaluates the real Starlark file (with starlark-pyo3) and reads the
constants it defines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from shimkit.errors import ShimkitError

CONFIG_RELPATH = Path("rules") / "shim_symbol_prefix.bzl"
CONFIG_ENV = "SHIMKIT_CONFIG"
_C_IDENT_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ShimConfig:
    """Values defined by the prefix file, plus where they came from."""

    prefix: str
    define: str
    families: tuple[str, ...]
    defines: tuple[str, ...]
    flags: tuple[str, ...]
    source: Path

    def is_family(self, name: str) -> bool:
        """True if `name` belongs to a shim family and is NOT prefixed."""
        return not name.startswith(self.prefix) and name.startswith(self.families)

    def is_prefixed_family(self, name: str) -> bool:
        """True if `name` is a prefixed shim-family name (e.g. <prefix>aoti_torch_x)."""
        return name.startswith(self.prefix) and name[len(self.prefix) :].startswith(self.families)

    def prefixed(self, name: str) -> str:
        """The private name for a shim-family `name`."""
        return self.prefix + name

    def as_dict(self) -> dict[str, object]:
        return {
            "prefix": self.prefix,
            "define": self.define,
            "families": list(self.families),
            "defines": list(self.defines),
            "flags": list(self.flags),
            "source": str(self.source),
        }


def find_config_file(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Locate the prefix file.

    Order: an explicit path, $SHIMKIT_CONFIG, the nearest
    `rules/shim_symbol_prefix.bzl` above the current directory, then the one
    in the source tree this package lives in (an editable install).
    """
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    here = Path.cwd().resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_RELPATH
        if candidate.is_file():
            return candidate
    bundled = Path(__file__).resolve().parents[2] / CONFIG_RELPATH
    if bundled.is_file():
        return bundled
    raise ShimkitError(
        f"cannot find {CONFIG_RELPATH}: run inside a shimkit checkout, "
        f"set ${CONFIG_ENV}, or pass --config PATH"
    )


_CONSTANTS = (
    "SHIM_SYMBOL_PREFIX",
    "SHIM_SYMBOL_PREFIX_DEFINE",
    "SHIM_SYMBOL_FAMILIES",
    "SHIM_PREFIX_DEFINES",
    "SHIM_PREFIX_FLAGS",
)


def _evaluate_bzl(path: Path) -> dict[str, object]:
    import starlark as sl  # imported lazily: only config reads need it

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


def load_config(path: str | os.PathLike[str] | None = None) -> ShimConfig:
    """Evaluate the prefix file and validate what it defines."""
    source = find_config_file(path)
    values = _evaluate_bzl(source)
    prefix = str(_require(values, source, "SHIM_SYMBOL_PREFIX", str))
    define = str(_require(values, source, "SHIM_SYMBOL_PREFIX_DEFINE", str))
    families = _require(values, source, "SHIM_SYMBOL_FAMILIES", list)
    defines = _require(values, source, "SHIM_PREFIX_DEFINES", list)
    flags = _require(values, source, "SHIM_PREFIX_FLAGS", list)
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
    return ShimConfig(
        prefix=prefix,
        define=define,
        families=tuple(str(f) for f in families),
        defines=tuple(str(d) for d in defines),
        flags=tuple(str(f) for f in flags),
        source=source.resolve(),
    )
