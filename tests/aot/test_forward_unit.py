"""The forwarding library's trampolines, with gcc and a fake target library (no torch)."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shimkit.aot.forward import build_forwarding_library, render_forwarding_source
from shimkit.config import ShimConfig

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or platform.machine() != "x86_64", reason="needs gcc on x86-64"
)

# 8 integer arguments (6 in registers, 2 on the stack) and 9 doubles (8 + 1).
TARGET_C = r"""
double aoti_torch_test_many(long a, long b, long c, long d, long e, long f, long g, long h,
                            double x0, double x1, double x2, double x3, double x4,
                            double x5, double x6, double x7, double x8) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h +
         x0 + 10 * x1 + 100 * x2 + 1000 * x3 + 1e4 * x4 + 1e5 * x5 + 1e6 * x6 + 1e7 * x7 + 1e8 * x8;
}
int aoti_torch_test_plain(int x) { return x * 3 + 1; }
"""
NAMES = ["aoti_torch_test_many", "aoti_torch_test_plain", "aoti_torch_test_missing"]


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory, config: ShimConfig) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("forward")
    target_c = work / "target.c"
    target_c.write_text(TARGET_C)
    target = work / "libfaketarget.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(target_c), "-o", str(target)], check=True)
    forward = build_forwarding_library(NAMES, config, output=work / "libfwd.so")
    return target, forward


def test_source_is_generated_from_the_name_list(config: ShimConfig) -> None:
    source = render_forwarding_source(NAMES, config.prefix)
    assert "generated" in source.splitlines()[0]
    for index, name in enumerate(NAMES):
        assert f"SHIMKIT_FWD_STUB({config.prefixed(name)}, {index});" in source


def test_trampolines_forward_register_and_stack_arguments(
    libs: tuple[Path, Path], config: ShimConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, forward = libs
    monkeypatch.setenv("SHIMKIT_FORWARD_TARGET", str(target))
    lib = ctypes.CDLL(str(forward))
    assert lib.shimkit_forward_count() == 3
    assert lib.shimkit_forward_resolvable() == 2  # the third name has no target
    many = getattr(lib, config.prefixed("aoti_torch_test_many"))
    many.restype = ctypes.c_double
    many.argtypes = [ctypes.c_long] * 8 + [ctypes.c_double] * 9
    ints = [1, 2, 3, 4, 5, 6, 7, 8]
    floats = [0.5, 1, 2, 3, 4, 5, 6, 7, 8]
    expected = sum((i + 1) * v for i, v in enumerate(ints)) + sum(
        v * 10**i for i, v in enumerate(floats)
    )
    for _ in range(2):  # first call binds lazily, the second jumps straight through
        assert many(*ints, *floats) == pytest.approx(expected)
    plain = getattr(lib, config.prefixed("aoti_torch_test_plain"))
    assert plain(5) == 16
    # Negative control: the unprefixed name is not exported by the forwarder.
    assert not hasattr(lib, "aoti_torch_test_plain")


def test_missing_target_aborts_with_the_name(libs: tuple[Path, Path], config: ShimConfig) -> None:
    target, forward = libs
    name = config.prefixed("aoti_torch_test_missing")
    code = (
        f"import ctypes, sys; getattr(ctypes.CDLL({str(forward)!r}), {name!r})(); print('returned')"
    )
    env = {**os.environ, "SHIMKIT_FORWARD_TARGET": str(target)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "returned" not in proc.stdout
    assert f"{name} was called but libtorch does not provide aoti_torch_test_missing" in proc.stderr
