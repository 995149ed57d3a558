"""The C extension behind `Model`'s hot call, or None (then ctypes is used).

`runtime/python/shimkit_fastcall.c` ships built in the wheel; in a checkout it is
built with the runtime (see `shimkit.runtime.build.build_fastcall`). It is imported
from that path.
`SHIMKIT_FASTCALL=0` turns it off; if it cannot be built or imported, one
warning line says why and every Model calls through ctypes instead.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from types import ModuleType

from shimkit.errors import ShimkitError
from shimkit.runtime.build import FASTCALL_MODULE, build_fastcall

FASTCALL_ENV = "SHIMKIT_FASTCALL"

_LOCK = threading.Lock()
_STATE: dict[str, ModuleType | None] = {}


def enabled() -> bool:
    """False when $SHIMKIT_FASTCALL is 0/off/false/no."""
    return os.environ.get(FASTCALL_ENV, "1").strip().lower() not in {"0", "off", "false", "no"}


def _import() -> ModuleType:
    path = build_fastcall()
    spec = importlib.util.spec_from_file_location(FASTCALL_MODULE, path)
    if spec is None or spec.loader is None:
        raise ShimkitError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module() -> ModuleType | None:
    """The extension module (built and imported once per process), or None."""
    if not enabled():
        return None
    with _LOCK:
        if "module" not in _STATE:
            try:
                _STATE["module"] = _import()
            except (ShimkitError, ImportError, OSError) as exc:
                warnings.warn(
                    f"shimkit.runtime: fast call extension unavailable, using ctypes: {exc}",
                    RuntimeWarning,
                    stacklevel=3,
                )
                _STATE["module"] = None
        return _STATE["module"]
