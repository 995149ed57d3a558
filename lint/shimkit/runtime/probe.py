"""Same-process proof: with libtorch global, a prefixed blob binds only to the slim shims.

`probe(path)` loads libtorch into global scope (the worst case), lints the
blob, and then either
- loads it through the slim runtime and reports, for every shim-family
  import, the library its resolved GOT slot points into; or
- (linter rejected it: the negative control) opens it raw in a child process
  next to libtorch and reports where its imports bound there, without ever
  letting it near the slim runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shimkit.config import ShimConfig, load_config
from shimkit.elf import ElfImage
from shimkit.errors import ShimkitError
from shimkit.runtime.admit import (
    check_served_prefix,
    lint_errors,
    read_loadable_image,
    served_config,
)
from shimkit.runtime.bindings import Binding, library_of, resolved_imports
from shimkit.runtime.blob import built_for_cuda, read_blob
from shimkit.runtime.capi import runtime_lib
from shimkit.runtime.cuda import CudaModel, cuda_runtime, parse_device
from shimkit.runtime.model import Model


@dataclass
class ProbeReport:
    blob: str
    provider: str
    libtorch: str | None
    device: str = "cpu"
    libtorch_cuda: str | None = None
    lint_errors: list[str] = field(default_factory=list)
    loaded_by_runtime: bool = False
    ran: bool = False
    bindings: list[Binding] = field(default_factory=list)

    @property
    def to_provider(self) -> list[Binding]:
        return [b for b in self.bindings if b.library == self.provider]

    @property
    def to_libtorch(self) -> list[Binding]:
        torch_libs = {lib for lib in (self.libtorch, self.libtorch_cuda) if lib}
        return [b for b in self.bindings if b.library in torch_libs]

    @property
    def ok(self) -> bool:
        """Loaded by the runtime and every shim import bound to the provider."""
        return (
            self.loaded_by_runtime
            and not self.lint_errors
            and bool(self.bindings)
            and len(self.to_provider) == len(self.bindings)
        )

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def load_libtorch_global(cuda: bool = False) -> tuple[str, str | None]:
    """Make libtorch_cpu.so's symbols global in this process, and libtorch_cuda.so's when
    `cuda` and this torch has it (where torch's CUDA shims live); returns their paths."""
    import ctypes

    try:
        import torch
    except ImportError:
        raise ShimkitError("torch is not installed: cannot put libtorch next to the blob") from None
    lib = Path(torch.__file__).parent / "lib"
    paths: list[str | None] = []
    for name, wanted in (("libtorch_cpu.so", True), ("libtorch_cuda.so", cuda)):
        path = lib / name
        if wanted and path.is_file():
            ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
            paths.append(os.path.realpath(path))
        else:
            paths.append(None)
    if paths[0] is None:
        raise ShimkitError(f"{lib}: no libtorch_cpu.so in this torch")
    return paths[0], paths[1]


def _shim_imports(image: ElfImage, config: ShimConfig) -> set[str]:
    return {
        s.name
        for s in image.imports
        if config.is_family(s.name) or config.is_prefixed_family(s.name)
    }


def _raw_bindings_in_child(data: bytes, location: str, cuda: bool) -> list[Binding]:
    """Negative control: dlopen the blob directly next to libtorch, in a child.

    The child gets the blob in an anonymous memory file (nothing on disk for a kill to
    leave behind); errors name the blob (`location`), never that file.
    """
    try:
        fd = os.memfd_create("shimkit-probe-blob", os.MFD_CLOEXEC)
    except OSError as exc:
        raise ShimkitError(f"{location}: cannot create a memory file: {exc.strerror}") from None
    raw = f"/proc/self/fd/{fd}"
    try:
        with open(fd, "wb", closefd=False) as handle:
            handle.write(data)
        proc = subprocess.run(
            [sys.executable, "-m", "shimkit.runtime.probe", "--raw-child", raw]
            + (["--cuda"] if cuda else []),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        last = last.replace(raw, "the blob")
        raise ShimkitError(f"{location}: opening it raw next to libtorch failed: {last}")
    return [Binding(**b) for b in json.loads(proc.stdout.strip().splitlines()[-1])]


def probe(
    path: str | Path,
    *,
    config: ShimConfig | None = None,
    with_libtorch: bool = True,
    run: bool = True,
    device: str = "auto",
) -> ProbeReport:
    """Lint, load and inspect one blob; see the module docstring. `config`: the prefix
    configuration (default: `load_config()`). `device` "auto" picks the CUDA runtime for a
    blob built for CUDA, else the CPU one; "cpu", "cuda", "cuda:N" force one."""
    import numpy as np

    config = config or load_config()
    source = read_blob(path)
    location = f"{source.path}!{source.member}" if source.member else str(source.path)
    image = read_loadable_image(source.data, location)
    if device == "auto":
        device = "cuda" if built_for_cuda([s.name for s in image.imports]) else "cpu"
    index = parse_device(device)
    libtorch, libtorch_cuda = (
        load_libtorch_global(cuda=index is not None) if with_libtorch else (None, None)
    )
    model: Model | CudaModel
    if index is None:
        rt = runtime_lib(config=config)
        provider_path = rt.provider_path()
        if provider_path is None:
            raise ShimkitError(f"{rt.paths.runtime}: {rt.last_error()}")
        config = served_config(config, rt.prefix(), rt.paths.runtime)
    else:
        provider_path = cuda_runtime().provider
    provider = os.path.realpath(provider_path)
    check_served_prefix(image, config, location)
    report = ProbeReport(
        blob=location,
        provider=provider,
        libtorch=libtorch,
        device=device,
        libtorch_cuda=libtorch_cuda,
    )
    report.lint_errors = lint_errors(image, config, Path(provider))
    wanted = _shim_imports(image, config)
    if report.lint_errors:
        if libtorch is not None:
            raw = _raw_bindings_in_child(source.data, location, index is not None)
            report.bindings = [b for b in raw if b.symbol in wanted]
        return report
    if index is None:
        model = Model(source, lint=False, config=config)
    else:
        model = CudaModel(source, index, lint=False)
    try:
        report.loaded_by_runtime = True
        report.bindings = resolved_imports(source.data, model.load_base, wanted)
        if (
            run
            and model.input_specs is not None
            and all(
                s.shape is not None and None not in s.shape and s.dtype for s in model.input_specs
            )
        ):
            model(*[np.zeros(s.shape, s.dtype) for s in model.input_specs])  # type: ignore[arg-type]
            report.ran = True
    finally:
        model.close()
    return report


def _raw_child(path: str, cuda: bool) -> int:
    import ctypes

    load_libtorch_global(cuda)
    data = Path(path).read_bytes()
    handle = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
    entry = ctypes.cast(handle.AOTInductorModelContainerRun, ctypes.c_void_p).value or 0
    from shimkit.runtime.bindings import _dladdr, _DlInfo

    info = _DlInfo()
    if _dladdr(ctypes.c_void_p(entry), ctypes.byref(info)) == 0:
        print("dladdr failed", file=sys.stderr)
        return 1
    bindings = resolved_imports(data, int(info.dli_fbase or 0))
    print(json.dumps([asdict(b) for b in bindings]))
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--raw-child":
        raise SystemExit(_raw_child(sys.argv[2], sys.argv[3:] == ["--cuda"]))
    raise SystemExit("usage: python -m shimkit.runtime.probe --raw-child BLOB.so [--cuda]")


__all__ = ["Binding", "ProbeReport", "library_of", "load_libtorch_global", "probe"]
