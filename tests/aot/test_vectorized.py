"""`shimkit compile` gives Inductor's CPU kernels the compile machine's vector instructions.

Without libtorch, Inductor's own proof of an instruction set (a probe library it builds
and dlopens) cannot load: ATen's vector code calls SLEEF, which libtorch provides. So
`CPU_INFERENCE_OPTIONS` sets `cpp.vec_isa_ok`, and the slim shims bring libsleef for the
blobs (docs/aot.md). A model of exp, GELU and softmax compiles to vectorized kernels that
import SLEEF, runs on the slim runtime and matches eager. Control: the same model compiled
without the option comes out scalar, and a compile with it later in the same process is
vectorized again (control: not when Inductor's first choice is kept). Every SLEEF function
torch's vector headers name for this machine is defined by the libsleef the shims bring
(control: the names for other machines are not).
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import shimkit.aot.compile as aot_compile
import shimkit.runtime as rt
from shimkit.aot.pt2 import read_blobs
from shimkit.elf import read_elf
from shimkit.runtime.capi import shim_library

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")

VECTOR_TYPE = "at::vec::Vectorized"


class Activations(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.proj(x))
        return torch.softmax(h, dim=-1) + torch.exp(-h)


def kernel_sources(package: Path) -> str:
    with zipfile.ZipFile(package) as archive:
        return "".join(
            archive.read(n).decode() for n in archive.namelist() if n.endswith(".kernel.cpp")
        )


def compiled(tmp_path: Path, name: str) -> Path:
    torch.manual_seed(0)
    exported = torch.export.export(Activations().eval(), (torch.randn(8, 64),))
    out = tmp_path / f"{name}.pt2"
    aot_compile.compile_exported(exported, out, label=name, show_progress=False)
    return out


def test_cpu_kernels_are_vectorized_and_run_on_the_slim_runtime(tmp_path: Path) -> None:
    package = compiled(tmp_path, "vectorized")
    assert VECTOR_TYPE in kernel_sources(package)
    [(member, data)] = read_blobs(package).items()
    imports = {s.name for s in read_elf(data, member).imports}
    assert any(n.startswith("Sleef_") for n in imports), sorted(imports)
    torch.manual_seed(0)
    model = Activations().eval()
    with rt.load(package) as slim:
        for seed in range(3):
            x = torch.randn(8, 64, generator=torch.Generator().manual_seed(seed))
            with torch.no_grad():
                want = model(x).numpy()
            np.testing.assert_allclose(slim(x.numpy())[0], want, rtol=1e-5, atol=1e-6)


ONE_PROCESS = """
import sys
from pathlib import Path
import shimkit.aot.compile as aot_compile
sys.path.insert(0, {tests!r})
import test_vectorized as t
if {keep_first_choice!r}:  # compile's own reference to it
    aot_compile.forget_vector_instructions = lambda torch: None
option = aot_compile.CPU_INFERENCE_OPTIONS.pop("cpp.vec_isa_ok")
print(t.VECTOR_TYPE in t.kernel_sources(t.compiled(Path({tmp!r}), "scalar")))
aot_compile.CPU_INFERENCE_OPTIONS["cpp.vec_isa_ok"] = option
print(t.VECTOR_TYPE in t.kernel_sources(t.compiled(Path({tmp!r}), "vectorized")))
"""


def vectorized_in_one_process(tmp_path: Path, keep_first_choice: bool) -> list[str]:
    """Compile without the option, then with it, in one new process: vectorized, each?"""
    script = ONE_PROCESS.format(
        tests=str(Path(__file__).parent), tmp=str(tmp_path), keep_first_choice=keep_first_choice
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-2:]


def test_without_the_option_kernels_are_scalar_and_a_later_compile_chooses_again(
    tmp_path: Path,
) -> None:
    # Inductor remembers the instruction sets it found for the process: compile forgets
    # them, so the second compile (with the option) is vectorized after a scalar one.
    assert vectorized_in_one_process(tmp_path, keep_first_choice=False) == ["False", "True"]


def test_control_remembered_instruction_sets_keep_a_later_compile_scalar(tmp_path: Path) -> None:
    assert vectorized_in_one_process(tmp_path, keep_first_choice=True) == ["False", "False"]


# SLEEF builds for other machines: torch's headers name their functions too.
OTHER_MACHINES = ("sve", "vsx", "advsimd", "neon", "vxe", "vxe2")


def sleef_names_in_torch_headers() -> set[str]:
    """Every SLEEF function ATen's vector code (what Inductor's kernels include) may call."""
    vec = Path(torch.__file__).parent / "include" / "ATen" / "cpu" / "vec"
    return {
        name
        for header in vec.rglob("*.h")
        for name in re.findall(r"\bSleef_\w+", header.read_text(errors="replace"))
    }


def undefined_in(library: str, names: set[str]) -> set[str]:
    """The names that `library` (opened by the system's loader, as a blob's scope would be)
    does not define."""
    handle = ctypes.CDLL(library)
    return {name for name in names if not hasattr(handle, name)}


def served_sleef() -> str:
    """The SLEEF library the slim CPU shims NEED (their blobs' SLEEF imports bind to it)."""
    shims = shim_library()
    needed = read_elf(shims.read_bytes(), str(shims)).needed
    [sleef] = [n for n in needed if n.startswith("libsleef")]
    return sleef


def test_every_sleef_function_torch_may_call_is_served() -> None:
    """A kernel Inductor vectorizes for this machine calls SLEEF functions by ATen's names;
    each must be defined by the libsleef the shims bring, or a blob using it would fail to
    load. Debian's SLEEF is older than torch's own copy: this finds a name it lacks."""
    names = {n for n in sleef_names_in_torch_headers() if not n.endswith(OTHER_MACHINES)}
    assert len(names) > 100, sorted(names)  # the headers were read
    assert undefined_in(served_sleef(), names) == set()


def test_control_names_for_other_machines_are_not_served() -> None:
    other = {n for n in sleef_names_in_torch_headers() if n.endswith(OTHER_MACHINES)}
    assert other, "torch's headers name SVE/VSX functions too"
    assert undefined_in(served_sleef(), other) == other
