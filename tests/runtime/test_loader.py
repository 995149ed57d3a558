"""Loader behaviour: private blob files (memory file or temp file), pre-dlopen checks, clean
errors."""

from __future__ import annotations

import os
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import shimkit.runtime as rt
from shimkit.errors import ShimkitError


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch) -> Path:
    """Point the runtime's temp files at an empty directory we can inspect."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    return d


@pytest.fixture
def temp_file_loads(monkeypatch) -> None:
    """Blobs go through a named temp file (the fallback where memory files cannot be used)."""
    monkeypatch.setenv("SHIMKIT_BLOB_MEMFD", "0")


@pytest.mark.usefixtures("temp_file_loads")
def test_temp_file_is_gone_once_loaded(cases, tmpdir_env: Path) -> None:
    """The blob's temp file is unlinked right after dlopen: nothing is left for a
    crash or a kill to leak, while the model still runs from the mapping."""
    model = rt.load(cases["mlp"].pt2)
    assert list(tmpdir_env.iterdir()) == []
    np.testing.assert_allclose(
        model(*cases["mlp"].inputs)[0], cases["mlp"].expected[0], rtol=1e-5, atol=1e-5
    )
    model.close()
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.usefixtures("temp_file_loads")
def test_predictable_names_cannot_block_loads(cases, tmpdir_env: Path) -> None:
    """Every name the old pid-and-counter scheme would pick is taken by someone
    else; the loader's random names (retried on a clash) still get through."""
    squatted = [tmpdir_env / f"shimkit-blob-{os.getpid()}-{n}.so" for n in range(256)]
    for path in squatted:
        path.write_bytes(b"")
    model = rt.load(cases["mlp"].pt2)
    model.close()
    assert sorted(tmpdir_env.iterdir()) == sorted(squatted)


@pytest.mark.parametrize("memfd", ["1", "0"])
def test_identical_blobs_from_threads_never_share_a_path(
    cases, tmpdir_env: Path, monkeypatch, memfd: str
) -> None:
    monkeypatch.setenv("SHIMKIT_BLOB_MEMFD", memfd)
    models: list[rt.Model] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            m = rt.load(cases["mlp"].pt2)
            with lock:
                models.append(m)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert list(tmpdir_env.iterdir()) == []
    # each is its own dlopen'd copy (its own load address) and runs
    bases = {int(m._rt.lib.shimkit_model_load_base(m._handle)) for m in models}
    assert len(bases) == 6
    for m in models:
        np.testing.assert_allclose(
            m(*cases["mlp"].inputs)[0], cases["mlp"].expected[0], rtol=1e-5, atol=1e-5
        )
    for m in models:
        m.close()
    assert list(tmpdir_env.iterdir()) == []


def _bad(path: Path, tmpdir_env: Path, *needles: str, lint: bool = False) -> str:
    with pytest.raises(ShimkitError) as info:
        rt.load(path, lint=lint)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    assert list(tmpdir_env.iterdir()) == [], "temp file left behind"
    return message


def test_non_elf(tmp_path: Path, tmpdir_env: Path) -> None:
    p = tmp_path / "x.so"
    p.write_bytes(b"hello world, not a blob")
    _bad(p, tmpdir_env, str(p), "neither a .pt2 archive nor an ELF blob")


# Each bad blob is refused twice over: by the C loader's own pre-dlopen
# checks (lint=False) and, first, by the shimkit linter (the default).
@pytest.mark.parametrize("keep", [64, 4096, 200_000])
@pytest.mark.parametrize(("lint", "needle"), [(False, "blob:"), (True, "rejected by the linter")])
def test_truncated_blob(
    cases, tmp_path: Path, tmpdir_env: Path, keep: int, lint: bool, needle: str
) -> None:
    with zipfile.ZipFile(cases["mlp"].pt2) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith(".so")))
    p = tmp_path / "trunc.so"
    p.write_bytes(data[:keep])
    _bad(p, tmpdir_env, needle, "truncated", lint=lint)


@pytest.mark.parametrize(
    ("lint", "needle"),
    [
        (False, "missing required entry point AOTInductorModelContainerCreateWithDevice"),
        (True, "SK008: does not export AOTInductorModelContainerCreateWithDevice"),
    ],
)
def test_missing_entry_points(
    fake_blob_dir: Path, tmpdir_env: Path, lint: bool, needle: str
) -> None:
    _bad(fake_blob_dir / "no_entries.so", tmpdir_env, needle, lint=lint)


@pytest.mark.parametrize(("lint", "needle"), [(False, "neither the slim shims"), (True, "SK004")])
def test_needs_a_shim_we_do_not_provide(
    fake_blob_dir: Path, tmpdir_env: Path, config, lint: bool, needle: str
) -> None:
    _bad(
        fake_blob_dir / "missing_shim.so",
        tmpdir_env,
        config.prefixed("aoti_torch_cpu_cholesky_solve"),
        needle,
        lint=lint,
    )


@pytest.mark.parametrize(
    ("lint", "needle"),
    [(False, "unprefixed shim aoti_torch_get_dim"), (True, "SK001: imports unprefixed shim")],
)
def test_unprefixed_import_rejected_although_libtorch_provides_it(
    fake_blob_dir: Path, tmpdir_env: Path, lint: bool, needle: str
) -> None:
    _bad(fake_blob_dir / "unprefixed.so", tmpdir_env, needle, lint=lint)


@pytest.mark.parametrize(
    ("lint", "needle"),
    [(False, "unprefixed shim aoti_torch_"), (True, "SK001: imports unprefixed shim")],
)
def test_real_unprefixed_blob_rejected(cases, tmpdir_env: Path, lint: bool, needle: str) -> None:
    _bad(cases["mlp_unprefixed"].pt2, tmpdir_env, needle, lint=lint)


@pytest.mark.parametrize("memfd", ["1", "0"])
def test_dlopen_failure_cleans_up(
    fake_blob_dir: Path, tmpdir_env: Path, monkeypatch, memfd: str
) -> None:
    monkeypatch.setenv("SHIMKIT_BLOB_MEMFD", memfd)
    message = _bad(
        fake_blob_dir / "bad_needed.so", tmpdir_env, "dlopen failed", "libshimkit_gone.so"
    )
    assert "/proc/self/fd" not in message and "shimkit-blob" not in message  # no private names


def test_pt2_without_blob(tmp_path: Path, tmpdir_env: Path) -> None:
    p = tmp_path / "empty.pt2"
    with zipfile.ZipFile(p, "w") as archive:
        archive.writestr("m/archive_format", "pt2")
    _bad(p, tmpdir_env, "expected exactly one AOTInductor blob")


def test_wrong_input_count(cases) -> None:
    with (
        rt.load(cases["mlp"].pt2) as model,
        pytest.raises(ShimkitError, match="takes 1 inputs, got 2"),
    ):
        model(*cases["mlp"].inputs, *cases["mlp"].inputs)


def test_wrong_shape_and_dtype_from_package_metadata(cases) -> None:
    x = cases["mlp"].inputs[0]
    with rt.load(cases["mlp"].pt2) as model:
        with pytest.raises(ShimkitError, match=r"expected shape \[4, 16\], got \[3, 16\]"):
            model(x[:3])
        with pytest.raises(ShimkitError, match="expected dtype float32, got float64"):
            model(x.astype(np.float64))
        np.testing.assert_allclose(model(x)[0], cases["mlp"].expected[0], rtol=1e-5, atol=1e-5)


def test_wrong_shape_without_metadata_fails_in_blob_check(cases, tmp_path: Path) -> None:
    """A bare .so has no input metadata: the blob's own input check (which the
    runtime turns on) rejects the input instead of reading out of bounds."""
    with zipfile.ZipFile(cases["mlp"].pt2) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".so"))
        blob = tmp_path / "mlp.so"
        blob.write_bytes(archive.read(member))
    x = cases["mlp"].inputs[0]
    with rt.load(blob) as model:
        with pytest.raises(ShimkitError, match="model run failed"):
            model(np.zeros((64, 64), np.float32))
        np.testing.assert_allclose(model(x)[0], cases["mlp"].expected[0], rtol=1e-5, atol=1e-5)
