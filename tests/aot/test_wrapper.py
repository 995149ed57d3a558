"""The `cpp.cxx` compiler wrapper, driven like Inductor drives it, with g++ (no torch compile)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from shimkit.aot.inductor_options import inductor_configs
from shimkit.aot.wrapper import make_compiler_wrapper
from shimkit.checks.blob import read_blob_image
from shimkit.config import ShimConfig

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

BLOB_CPP = r"""
#include <string>
extern "C" int aoti_torch_get_numel(void*, long*);
extern "C" int aoti_torch_dtype_float32();
#define SHIM_DTYPE(x) aoti_torch_dtype_##x
std::string vague_linkage_helper(const char* s) { return std::string(s) + "!"; }
extern "C" __attribute__((visibility("default"))) int AOTInductorModelContainerRun(void* t) {
  long n = 0;
  int size = (int)vague_linkage_helper("x").size();
  return aoti_torch_get_numel(t, &n) + SHIM_DTYPE(float32)() + size;
}
"""
# Like Inductor's weights object: assembly without .note.GNU-stack (=> executable stack).
WEIGHTS_S = "  .section .rodata\n  .globl weights_blob\nweights_blob:\n  .byte 1, 2, 3, 4\n"


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SHIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "blob.cpp").write_text(BLOB_CPP)
    (tmp_path / "weights.S").write_text(WEIGHTS_S)
    return tmp_path


def build(compiler: str, work: Path, name: str) -> Path:
    """Compile and link the way Inductor does: objects with -c, then one -shared link."""
    for src, obj in (("blob.cpp", "blob.o"), ("weights.S", "weights.o")):
        subprocess.run(
            [compiler, "-c", "-fPIC", "-O1", str(work / src), "-o", str(work / obj)], check=True
        )
    out = work / name
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            str(work / "blob.o"),
            str(work / "weights.o"),
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


def read_names(path: Path) -> tuple[list[str], list[str], bool | None]:
    """(imports, exports, exec_stack) of a built .so, as the linter reads it."""
    image = read_blob_image(path.read_bytes(), str(path))
    return [s.name for s in image.imports], [s.name for s in image.exports], image.exec_stack


def test_wrapper_renames_hides_and_clears_exec_stack(
    sources: Path, rename_header: Path, config: ShimConfig
) -> None:
    wrapper = make_compiler_wrapper(config, rename_header.read_text())
    assert "g++" in wrapper.path.name and wrapper.header is not None
    imports, exports, exec_stack = read_names(build(str(wrapper.path), sources, "wrapped.so"))
    assert config.prefixed("aoti_torch_get_numel") in imports
    assert config.prefixed("aoti_torch_dtype_float32") in imports
    assert not [s for s in imports if config.is_family(s)]
    assert exports == ["AOTInductorModelContainerRun"]
    assert not exec_stack


def test_plain_gxx_is_the_negative_control(sources: Path, config: ShimConfig) -> None:
    imports, exports, exec_stack = read_names(build("g++", sources, "plain.so"))
    assert "aoti_torch_get_numel" in imports
    assert "aoti_torch_dtype_float32" in imports
    assert any("vague_linkage_helper" in e for e in exports)
    assert exec_stack


def test_wrapper_path_follows_content(sources: Path, config: ShimConfig) -> None:
    first = make_compiler_wrapper(config, "// header one\n")
    again = make_compiler_wrapper(config, "// header one\n")
    other = make_compiler_wrapper(config, "// header two\n")
    assert first.path == again.path
    assert first.path.parent != other.path.parent  # Inductor's caches key on cpp.cxx
    version = subprocess.run(
        [str(first.path), "--version"], capture_output=True, text=True, check=True
    )
    assert "g++" in version.stdout or "GCC" in version.stdout


def fake_torch(native: bool) -> SimpleNamespace:
    aot = SimpleNamespace(shim_symbol_prefix="") if native else SimpleNamespace()
    return SimpleNamespace(_inductor=SimpleNamespace(config=SimpleNamespace(aot_inductor=aot)))


def test_inductor_options_without_and_with_torchs_prefix_option(
    sources: Path, config: ShimConfig
) -> None:
    names = ["aoti_torch_get_numel"]
    options, native = inductor_configs(fake_torch(False), config, names)  # type: ignore[arg-type]
    assert not native and "aot_inductor.shim_symbol_prefix" not in options
    assert options["aot_inductor.link_libtorch"] is False
    script = Path(options["cpp.cxx"]).read_text()
    assert "-include /" in script and f"-D{config.define}={config.prefix}" in script
    options, native = inductor_configs(fake_torch(True), config, names)  # type: ignore[arg-type]
    assert native and options["aot_inductor.shim_symbol_prefix"] == config.prefix
    script = Path(options["cpp.cxx"]).read_text()
    assert "-include /" not in script and "aoti_shim_rename.h" not in script
    assert "--version-script" in script and "-fvisibility=hidden" in script
    assert options["aot_inductor.link_libtorch"] is False
