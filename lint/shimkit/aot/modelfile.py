"""Load what to compile: a Python file defining a model and inputs, or a saved ExportedProgram."""

from __future__ import annotations

import logging
import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from shimkit.errors import ShimkitError

EXPORTED_SUFFIXES = (".pt2", ".ep")


def one_paragraph(exc: BaseException, limit: int = 800) -> str:
    """An exception as `Type: first paragraph`, whitespace collapsed, bounded. A first
    paragraph that only announces what follows (it ends in a colon, as torch's "An exception
    occurred in a subprocess:" before a worker's traceback) gets the message's last line,
    which names the error that was raised."""
    text = str(exc).strip()
    paragraph = text.split("\n\n", 1)[0]
    last_line = text.splitlines()[-1].strip() if text else ""
    if paragraph.rstrip().endswith(":") and last_line and last_line not in paragraph:
        paragraph = f"{paragraph} ... {last_line}"
    flat = " ".join(paragraph.split()) or "(no message)"
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    return f"{type(exc).__name__}: {flat}"


@contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """Silence torch's warning logs (with tracebacks and graph dumps) inside the block.

    Failures are reported by shimkit as one line; torch's own chatter about
    the same failure would bury it.
    """
    manager = logging.Logger.manager
    names = ["torch"] + [name for name in manager.loggerDict if name.startswith("torch.")]
    loggers = [logging.getLogger(name) for name in names]
    saved = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR + 10)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _lies_beside(module: ModuleType, directory: Path) -> bool:
    """A module file or package directory right in `directory` (not deeper: a virtualenv
    or vendored tree under the project is not the model file's own)."""
    origin = getattr(module, "__file__", None)
    if origin is None:
        return False
    path = Path(origin).resolve()
    return path.parent == directory or (
        path.name == "__init__.py" and path.parent.parent == directory
    )


@contextmanager
def beside_its_modules(path: Path) -> Iterator[None]:
    """Run a model file as `python path` would: its directory first on sys.path, so it
    imports the modules beside it. Those modules (and their submodules) leave sys.modules
    afterwards, so the next model file, from another directory, gets its own of the same
    name (as a second `python` process would); anything else it imported stays."""
    directory = path.resolve().parent
    before = set(sys.modules)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
        new = set(sys.modules) - before
        own = {n for n in new if "." not in n and _lies_beside(sys.modules[n], directory)}
        for name in new:
            if name.split(".")[0] in own:
                del sys.modules[name]


@dataclass
class ModelFile:
    """What a model file defines: the module, its example inputs and, if the file says,
    torch.export's `dynamic_shapes` for them (None: every size as in the example)."""

    model: Any
    inputs: tuple[Any, ...]
    dynamic_shapes: Any = None


def load_model_file(
    path: Path,
    torch: ModuleType,
    model_attr: str = "model",
    inputs_attr: str = "example_inputs",
    dynamic_shapes_attr: str = "dynamic_shapes",
) -> ModelFile:
    """Run a model file and return its `model_attr` and `inputs_attr` values, checked, with
    its `dynamic_shapes_attr` value where it defines one (optional)."""
    if not path.is_file():
        raise ShimkitError(f"{path}: model file not found")
    try:
        with beside_its_modules(path):
            namespace = runpy.run_path(str(path), run_name="__shimkit_model__")
    except SystemExit as exc:
        raise ShimkitError(f"{path}: the model file exited (SystemExit {exc.code})") from None
    except Exception as exc:
        raise ShimkitError(f"{path}: running the model file failed: {one_paragraph(exc)}") from None
    missing = [name for name in (model_attr, inputs_attr) if name not in namespace]
    if missing:
        raise ShimkitError(
            f"{path}: does not define {' and '.join(repr(m) for m in missing)} "
            f"(expected `{model_attr} = <nn.Module>` and `{inputs_attr} = (<tensor>, ...)`; "
            "other names: --model-attr/--inputs-attr)"
        )
    model = namespace[model_attr]
    inputs = namespace[inputs_attr]
    if not isinstance(model, torch.nn.Module):
        raise ShimkitError(
            f"{path}: {model_attr!r} is a {type(model).__name__}, not a torch.nn.Module"
        )
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, tuple):
        raise ShimkitError(
            f"{path}: {inputs_attr!r} is a {type(inputs).__name__}, not a tuple of inputs"
        )
    dynamic_shapes = namespace.get(dynamic_shapes_attr)
    if dynamic_shapes is not None and not isinstance(dynamic_shapes, (tuple, list, dict)):
        raise ShimkitError(
            f"{path}: {dynamic_shapes_attr!r} is a {type(dynamic_shapes).__name__}, not "
            "torch.export's dynamic_shapes (a tuple with one entry per input, or a dict by "
            "argument name; for example `({0: torch.export.Dim('batch')},)`)"
        )
    return ModelFile(model, inputs, dynamic_shapes)


def load_exported_program(path: Path, torch: ModuleType) -> Any:
    """torch.export.load a saved ExportedProgram, with a clear error for anything else."""
    if not path.is_file():
        raise ShimkitError(f"{path}: exported program not found")
    try:
        with quiet_torch_logs(), path.open("rb") as handle:
            return torch.export.load(handle)
    except Exception as exc:
        raise ShimkitError(
            f"{path}: not a saved ExportedProgram (torch.export.save output): {one_paragraph(exc)}"
        ) from None
