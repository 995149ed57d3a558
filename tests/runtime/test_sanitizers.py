"""The e2e models on an ASan+UBSan build of shims and runtime, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shimkit.runtime.build import build

CHILD = Path(__file__).with_name("asan_child.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def asan_env(libs) -> dict[str, str]:
    asan_libs = build("asan")
    libasan = subprocess.run(
        ["g++", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert Path(libasan).is_file(), libasan
    env = dict(os.environ)
    env.update(
        SHIMKIT_LIB_DIR=str(asan_libs.runtime.parent),
        LD_PRELOAD=libasan,
        # Python itself "leaks" at exit; leaks are not what this test is about.
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
        PYTHONPATH=str(ROOT),
    )
    return env


def _child(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_models_run_clean_under_asan_ubsan(cases, asan_env) -> None:
    args: list[str] = []
    for name in ("mlp", "convnet_cl", "topk"):
        case = cases[name]
        args += [str(case.pt2), str(case.pt2.with_suffix(".npz"))]
    proc = _child(asan_env, "run", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ok ") == 3
    assert "runtime error" not in proc.stderr  # UBSan reports


def test_negative_control_asan_catches_use_after_free(asan_env) -> None:
    proc = _child(asan_env, "use-after-free")
    assert proc.returncode != 0
    assert "heap-use-after-free" in proc.stderr
    assert "went unnoticed" not in proc.stdout


def test_elf_precheck_survives_hostile_blobs_under_asan(cases, asan_env) -> None:
    proc = _child(asan_env, "hostile", str(cases["mlp"].pt2))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no sanitizer report" in proc.stdout
    rejected = int(proc.stdout.split("hostile: ")[1].split()[0])
    assert rejected >= 100  # truncations at least are all refused
