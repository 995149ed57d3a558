"""(d) shimkit's wheel in a fresh venv outside the checkout: config, lint and gate from
acme's directory follow acme's prefix file; `shimkit run` runs a default-prefix blob on
the slim runtime shipped in the wheel. Negative controls: acme's prefix file changes but
its blob does not (lint fails with bit 8); a blob for another prefix is refused in one line."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from shimkit.config import ShimConfig

from tests.adopt.conftest import (
    ROOT,
    CMakeBuild,
    Venv,
    copy_acme,
    exports,
    ok,
    run,
    timed,
    with_prefix,
)
from tests.runtime.blobs import build_case

pytestmark = pytest.mark.slow


def test_wheel_is_self_contained(wheel: Path, fresh_venv: Venv) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "-manylinux_" in wheel.name  # auditwheel repair retagged it (tools/build_wheel.py)
    for shipped in (
        "shimkit/_native/lib/libshimkit_shims.so",
        "shimkit/_native/lib/libshimkit_runtime.so",
        "shimkit/_native/bin/shimkit-run-blob",
        "shimkit/_native/include/shims/aoti_shim_rename.h",
        "shimkit/_native/share/cmake/shimkit/shimkitConfig.cmake",
        "shimkit/_native/share/shimkit/shim_symbol_prefix.bzl",
        "shimkit/py.typed",
    ):
        assert shipped in names, shipped
    # The fast call (loaded by path) and the ELF reader's compiled names (a package
    # module), built at wheel time.
    extensions = [n for n in names if n.endswith(".so") and n.rsplit("/", 1)[-1].startswith("_")]
    assert sorted(n.split(".")[0] for n in extensions) == [
        "shimkit/_native/python/_shimkit_fastcall",
        "shimkit/elf/_symnames",
    ], extensions
    assert any(n.startswith("shimkit.libs/libopenblas") for n in names)  # vendored
    assert any(n.startswith("shimkit.libs/libsleef") for n in names)  # for vectorized blobs
    assert not [n for n in names if n.endswith((".c", ".cpp"))]  # nothing to compile
    assert any(n.endswith("licenses/LICENSE") for n in names)
    # The installed package is the venv's, not this checkout's.
    where = ok(
        run(
            [fresh_venv.bin / "python", "-c", "import shimkit; print(shimkit.__file__)"],
            cwd=fresh_venv.root,
            env=fresh_venv.env(),
        )
    ).stdout.strip()
    assert where.startswith(str(fresh_venv.root))


def test_config_lint_gate_follow_the_consumer(acme_cmake: CMakeBuild, fresh_venv: Venv) -> None:
    acme, env = acme_cmake.source, fresh_venv.env()
    with timed("wheel consumer: config/lint/gate"):
        config = json.loads(
            ok(run(["shimkit", "config", "--format", "json"], cwd=acme, env=env)).stdout
        )
        assert config["prefix"] == "acme_"
        assert config["source"] == str(acme / "shim_symbol_prefix.bzl")
        assert config["reason"] == f"config in {acme / '.shimkit.toml'}"
        # acme's library (built by CMake from acme's prefix file) and acme's blob lint clean.
        assert {"acme_aoti_torch_dtype_float32"} <= exports(acme_cmake.shims)
        ok(run(["shimkit", "lint", "--no-reference", acme_cmake.shims], cwd=acme, env=env))
        ok(run(["shimkit", "lint", "--no-reference", "models/"], cwd=acme, env=env))
        gate = [
            "shimkit",
            "gate",
            "--no-reference",
            "--baseline",
            "shimkit-baseline.json",
            "models/",
        ]
        ok(run([*gate, "--update"], cwd=acme, env=env))
        ok(run(gate, cwd=acme, env=env))
        baseline = json.loads((acme / "shimkit-baseline.json").read_text())
        assert baseline["config"]["prefix"] == "acme_"


def test_prefix_change_fails_lint_and_gate(
    acme_cmake: CMakeBuild, fresh_venv: Venv, acme_blob: Path, tmp_path: Path
) -> None:
    """Negative control: the prefix file says acme2_, the blob and the library stay acme_."""
    acme = copy_acme(tmp_path / "acme", acme_blob)
    shutil.copyfile(acme_cmake.shims, acme / "libacme_shims.so")
    env = fresh_venv.env()
    gate = ["shimkit", "gate", "--no-reference", "--baseline", "shimkit-baseline.json", "models/"]
    ok(run([*gate, "--update"], cwd=acme, env=env))
    with_prefix(acme / "shim_symbol_prefix.bzl", "acme2_")
    lint = run(
        ["shimkit", "lint", "--no-reference", "models/", "libacme_shims.so"], cwd=acme, env=env
    )
    assert lint.returncode & 8, lint.stdout + lint.stderr
    assert "SK001" in lint.stdout and "SK002" in lint.stdout
    assert "acme_aoti_torch_dtype_float32  [prefix acme_, configured acme2_]" in lint.stdout
    # The gate refuses the baseline of the old prefix outright (bit 1), naming both.
    gated = run(gate, cwd=acme, env=env)
    assert gated.returncode & 1, gated.stdout + gated.stderr
    assert "written for prefix 'acme_'" in gated.stdout and "says 'acme2_'" in gated.stdout


def test_run_default_prefix_blob_from_the_consumer(
    acme_cmake: CMakeBuild, fresh_venv: Venv, config: ShimConfig, tmp_path: Path
) -> None:
    """The wheel's runtime serves shimkit's default prefix, whatever acme's prefix file says."""
    case = build_case("mlp")  # compiled for shimkit's default prefix (tests/runtime/blobs.py)
    np.save(tmp_path / "x.npy", case.inputs[0])
    acme, env = acme_cmake.source, fresh_venv.env()
    with timed("wheel consumer: shimkit run"):
        proc = ok(
            run(
                [
                    "shimkit",
                    "run",
                    case.pt2,
                    "--input",
                    tmp_path / "x.npy",
                    "--save-dir",
                    tmp_path / "out",
                ],
                cwd=acme,
                env=env,
            )
        )
    np.testing.assert_allclose(
        np.load(tmp_path / "out" / "out0.npy"), case.expected[0], rtol=1e-4, atol=1e-5
    )
    assert "output 0: float32" in proc.stdout
    # Negative control: acme's blob (acme_) is refused in one line naming both prefixes.
    refused = run(["shimkit", "run", "models/tiny_mlp.pt2", "--zeros"], cwd=acme, env=env)
    assert refused.returncode == 1
    (line,) = refused.stderr.splitlines()
    assert f"this runtime serves prefix {config.prefix}" in line
    assert "under prefix acme_" in line and "SHIMKIT_LIB_DIR" in line


def test_a_runtime_for_the_consumers_prefix_runs_its_blob(
    acme_cmake: CMakeBuild, fresh_venv: Venv, tmp_path: Path
) -> None:
    """What the refusal above advises: shimkit's CMakeLists.txt builds the slim runtime for
    acme's prefix file, and with $SHIMKIT_LIB_DIR the wheel's `shimkit run` runs acme's blob."""
    acme, env = acme_cmake.source, fresh_venv.env()
    build = tmp_path / "acme-runtime"
    with timed("runtime for acme_ (CMake) + run"):
        ok(
            run(
                [
                    "cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                    f"-DSHIMKIT_PREFIX_FILE={acme / 'shim_symbol_prefix.bzl'}",
                    f"-DPython_EXECUTABLE={fresh_venv.bin / 'python'}",
                    "-DSHIMKIT_PYTHON_EXTENSIONS=OFF",
                ],
                cwd=acme,
                env=env,
            )
        )  # fmt: skip
        ok(run(["cmake", "--build", build], cwd=acme, env=env))
        assert "acme_aoti_torch_empty_strided" in exports(build / "lib" / "libshimkit_shims.so")
        lib_env = fresh_venv.env(SHIMKIT_LIB_DIR=str(build / "lib"))
        proc = ok(run(["shimkit", "run", "models/tiny_mlp.pt2", "--zeros"], cwd=acme, env=lib_env))
    assert "output 0: float32 [2, 4]" in proc.stdout
