"""The shim-name parser on synthetic headers and on the installed torch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from shimkit.errors import ShimkitError
from shimkit.header import find_torch, shim_names
from shimkit.header.parse import names_in_text

SYNTHETIC = r"""
#pragma once
#define AOTI_TORCH_EXPORT __attribute__((__visibility__("default")))
#define AOTI_TORCH_CHECK(cond) \
  do { AOTI_TORCH_EXPORT int not_a_decl(void); } while (0)
AOTI_TORCH_EXPORT void cxx_outside_region(const std::string& s);
#ifdef __cplusplus
extern "C" {
#endif
// AOTI_TORCH_EXPORT int commented_out(void);
/* AOTI_TORCH_EXPORT int block_commented(void); */
AOTI_TORCH_EXPORT int32_t aoti_torch_dtype_float32();
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_multi_line(
    AtenTensorHandle self,  // a trailing comment with (parens)
    int64_t* ret);
struct Opaque { int field; };
#if SOME_FEATURE
AOTI_TORCH_EXPORT AOTITorchError torch_under_if(void* (*fn)(void*), int x);
#endif
int not_exported(void);
#ifdef __cplusplus
} // extern "C"
#endif
AOTI_TORCH_EXPORT const std::string& get_torch_exception_what();
"""


def test_synthetic_header_yields_only_c_linkage_exports() -> None:
    assert names_in_text(SYNTHETIC) == [
        "aoti_torch_dtype_float32",
        "aoti_torch_multi_line",
        "torch_under_if",
    ]


def test_header_without_extern_c_yields_nothing() -> None:
    # Negative control: the same exports outside an extern "C" block are C++ names.
    text = "AOTI_TORCH_EXPORT int32_t aoti_torch_dtype_float32();\n"
    assert names_in_text(text) == []


def test_missing_include_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ShimkitError, match="no C shim headers found"):
        shim_names(tmp_path)


def test_installed_torch_names_are_c_names() -> None:
    torch = find_torch()
    names = shim_names(torch.include_dir)
    assert len(names) == len(set(names)) == len(sorted(names))
    assert "aoti_torch_get_numel" in names
    assert "aoti_torch_cpu_addmm_out" in names
    assert any(n.startswith("torch_") for n in names)  # the stable C ABI
    # shim_exception_state.h declares C++ (mangled) functions: never in the list.
    assert "get_torch_exception_what" not in names
    assert "set_torch_exception_what" not in names
    if torch.version.startswith("2.13."):
        assert len(names) == 791
        assert sum(n.startswith("aoti_torch_") for n in names) == 733


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils nm")
def test_every_libtorch_shim_export_is_in_the_list() -> None:
    """Completeness against the real library: libtorch_cpu's aoti_torch_* exports."""
    torch = find_torch()
    lib = torch.package_dir / "lib" / "libtorch_cpu.so"
    if not lib.is_file():
        pytest.skip("no libtorch_cpu.so in this torch install")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    exported = {
        line.split()[-1]
        for line in out.splitlines()
        if line.split() and line.split()[-1].startswith("aoti_torch_")
    }
    assert len(exported) > 100
    missing = exported - set(shim_names(torch.include_dir))
    assert not missing, f"exported by libtorch but not in the rename list: {sorted(missing)[:10]}"
