"""The checked-in rename header: it renames with the define, is inert without, and is current."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from shimkit.cli import main
from shimkit.config import ShimConfig

needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm"
)

# Defines one shim, declares and calls another, and forms a third by pasting.
TINY_C = r"""
#include <stdint.h>
#define SHIM_DTYPE(x) aoti_torch_dtype_##x
int32_t aoti_torch_dtype_float32(void);
int32_t aoti_torch_device_type_cpu(void) { return 0; }
int32_t use(void) { return SHIM_DTYPE(float32)() + aoti_torch_device_type_cpu(); }
int32_t torch_get_const_data_ptr(void);
int32_t use_stable(void) { return torch_get_const_data_ptr(); }
"""


def compile_and_nm(tmp_path: Path, header: Path, flags: list[str]) -> dict[str, str]:
    source = tmp_path / "tiny.c"
    source.write_text(TINY_C)
    obj = tmp_path / "tiny.o"
    subprocess.run(
        ["gcc", "-c", "-std=c11", "-include", str(header), *flags, str(source), "-o", str(obj)],
        check=True,
    )
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        symbols[parts[-1]] = parts[-2]
    return symbols


@needs_gcc
def test_define_renames_definitions_declarations_calls_and_pastes(
    tmp_path: Path, rename_header: Path, config: ShimConfig
) -> None:
    symbols = compile_and_nm(tmp_path, rename_header, [f"-D{config.define}={config.prefix}"])
    assert symbols[config.prefixed("aoti_torch_device_type_cpu")] == "T"
    assert symbols[config.prefixed("aoti_torch_dtype_float32")] == "U"
    assert symbols[config.prefixed("torch_get_const_data_ptr")] == "U"
    assert not [name for name in symbols if config.is_family(name)]


@needs_gcc
def test_without_define_names_are_unchanged(tmp_path: Path, rename_header: Path) -> None:
    symbols = compile_and_nm(tmp_path, rename_header, [])
    assert symbols["aoti_torch_device_type_cpu"] == "T"
    assert symbols["aoti_torch_dtype_float32"] == "U"
    assert symbols["torch_get_const_data_ptr"] == "U"


def test_header_is_generated_and_has_no_prefix(rename_header: Path, config: ShimConfig) -> None:
    text = rename_header.read_text()
    assert "generated" in text.splitlines()[0]
    assert config.prefix not in text
    assert f"#ifdef {config.define}" in text


def test_check_passes_on_checked_in_header(
    rename_header: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["header", "--check", "--output", str(rename_header)]) == 0
    assert capsys.readouterr().out == ""


def test_check_fails_with_diff_on_drift(
    tmp_path: Path, rename_header: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = rename_header.read_text().splitlines(keepends=True)
    dropped = next(line for line in lines if line.startswith("#define aoti_torch_get_numel "))
    copy = tmp_path / "aoti_shim_rename.h"
    copy.write_text("".join(line for line in lines if line != dropped))
    assert main(["header", "--check", "--output", str(copy)]) != 0
    out = capsys.readouterr().out
    assert f"+{dropped}" in out
    assert out.startswith("---")


def test_header_does_not_depend_on_the_prefix(
    tmp_path: Path, rename_header: Path, config: ShimConfig
) -> None:
    other = tmp_path / "rules" / "shim_symbol_prefix.bzl"
    other.parent.mkdir()
    other.write_text(config.source.read_text().replace(f'"{config.prefix}"', '"someother_"', 1))
    out = tmp_path / "h.h"
    assert main(["--config", str(other), "header", "--output", str(out)]) == 0
    assert out.read_text() == rename_header.read_text()
