"""Several compiles in one process: torch's compile workers must not outlive a compile's
private TMPDIR.

torch keeps its compile-worker pool for the process, and the workers inherit the TMPDIR
of the compile that started them, which is removed when that compile ends. Found on CUDA
(where Inductor compiles Triton kernels in those workers): every compile after the first
in one process failed, the workers writing their .ptx into the removed folder. Here the
real pool (torch's SubprocPool) runs what a Triton compile does with TMPDIR, a scratch
file from `tempfile`, inside compile's own AOTInductor step, twice.
"""

from __future__ import annotations

import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from shimkit.aot import compile as aot_compile
from shimkit.errors import ShimkitError

pytestmark = pytest.mark.slow


@pytest.fixture
def worker_pool() -> Any:
    """torch's async-compile module with its process pool enabled (two workers) and no pool
    left over from other tests, before or after."""
    pytest.importorskip("torch")
    import torch._inductor.async_compile as async_compile
    import torch._inductor.config as inductor_config

    async_compile.shutdown_compile_workers()
    with inductor_config.patch(compile_threads=2, worker_start_method="subprocess"):
        yield async_compile
    async_compile.shutdown_compile_workers()


def fake_aoti(async_compile: Any, blob: Path) -> Any:
    """An aoti_compile_and_package whose kernels compile in torch's worker pool (each writes
    a scratch file under its TMPDIR, as Triton's .ptx) and whose package holds `blob`."""

    def compile_and_package(exported: Any, package_path: str, inductor_configs: Any) -> None:
        pool = async_compile.AsyncCompile.process_pool()
        pool.submit(tempfile.mkstemp, ".ptx").result()
        with zipfile.ZipFile(package_path, "w") as package:
            package.write(blob, "model/data/aotinductor/model/model.wrapper.so")

    return compile_and_package


def compile_twice(torch: Any, tmp_path: Path) -> None:
    for n in range(2):
        aot_compile.package_blobs(
            torch, None, tmp_path / f"model{n}.pt2", {}, "model", tmp_path / f"model{n}.pt2"
        )


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    out = tmp_path / "empty.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "/dev/null", "-o", str(out)], check=True)
    return out


def test_a_second_compile_in_one_process_gets_working_workers(
    worker_pool: Any, blob: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", fake_aoti(worker_pool, blob))
    compile_twice(torch, tmp_path)


def test_kept_workers_fail_the_second_compile_naming_the_cause(
    worker_pool: Any, blob: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with the workers kept, the second compile fails as on CUDA, and the
    one-line error names the worker's error (the last line of its traceback), not only
    torch's "An exception occurred in a subprocess:"."""
    import torch

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", fake_aoti(worker_pool, blob))
    monkeypatch.setattr(aot_compile, "stop_compile_workers", lambda: None)
    with pytest.raises(ShimkitError) as failure:
        compile_twice(torch, tmp_path)
    message = str(failure.value)
    assert "AOTInductor compile failed" in message and "\n" not in message
    assert "FileNotFoundError" in message and "No such file or directory" in message
