"""`shimkit compile` gives Inductor's CPU kernels the compile machine's vector instructions.

Without libtorch, Inductor's own proof of an instruction set (a probe library it builds
and dlopens) cannot load: ATen's vector code calls SLEEF, which libtorch provides. So
`CPU_INFERENCE_OPTIONS` sets `cpp.vec_isa_ok`, and the slim shims bring libsleef for the
blobs (docs/aot.md). A model of exp, GELU and softmax compiles to vectorized kernels that
import SLEEF, runs on the slim runtime and matches eager. Control: the same model compiled
without the option comes out scalar.
"""

from __future__ import annotations

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


CONTROL = """
import sys
from pathlib import Path
import shimkit.aot.compile as aot_compile
sys.path.insert(0, {tests!r})
import test_vectorized as t
aot_compile.CPU_INFERENCE_OPTIONS.pop("cpp.vec_isa_ok")
print(t.VECTOR_TYPE in t.kernel_sources(t.compiled(Path({tmp!r}), "scalar")))
"""


def test_control_without_the_option_kernels_are_scalar(tmp_path: Path) -> None:
    # Its own process: Inductor remembers the instruction sets it found for the process.
    script = CONTROL.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "False"
