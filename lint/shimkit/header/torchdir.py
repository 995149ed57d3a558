"""Locate the installed torch package, its include dir and version, without importing it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from shimkit.errors import ShimkitError

INSTALL_HINT = "install it with `pip install torch` (CPU wheels: --index-url https://download.pytorch.org/whl/cpu)"


@dataclass(frozen=True)
class TorchInstall:
    """Where torch lives and which version it is."""

    package_dir: Path
    include_dir: Path
    version: str


def find_torch() -> TorchInstall:
    """The torch package visible to this interpreter (found by importlib, not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ShimkitError(f"torch: not installed in this Python environment; {INSTALL_HINT}")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    include_dir = package_dir / "include"
    if not include_dir.is_dir():
        raise ShimkitError(
            f"{package_dir}: torch has no include/ directory (a stripped install?); "
            f"reinstall it: {INSTALL_HINT}"
        )
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return TorchInstall(package_dir=package_dir, include_dir=include_dir, version=version)


def torch_include_version(include_dir: Path) -> str:
    """Best-effort torch version for an include dir given on the command line."""
    candidate = include_dir.parent / "version.py"
    if candidate.is_file():
        for line in candidate.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    return "unknown"
