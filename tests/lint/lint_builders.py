"""gcc-built ELF fixtures for the lint rules: one failing file and its passing control.

Sources are generated from the configuration (never a typed prefix), built
once per session into a temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from shimkit.config import ShimConfig

ENTRY_POINTS_C = """
int AOTInductorModelContainerCreateWithDevice(void) { return 0; }
int AOTInductorModelContainerDelete(void) { return 0; }
int AOTInductorModelContainerRun(void) { return 0; }
int AOTInductorModelContainerGetNumInputs(void) { return 0; }
"""


@dataclass(frozen=True)
class Spec:
    name: str
    source: str
    language: str = "c"  # "c" | "c++"
    flags: tuple[str, ...] = ("-Wl,-z,noexecstack",)
    add_needed: tuple[str, ...] = ()
    shared: bool = True


def specs(config: ShimConfig) -> list[Spec]:
    p = config.prefix
    o = "other_" + p  # another prefix (SK001/SK002 must tell it from the configured one)
    return [
        # SK001 and control
        Spec(
            "libimports_unprefixed.so",
            "extern int aoti_torch_get_dim(void*, long*);\n"
            "int f(void* t) { long d; return aoti_torch_get_dim(t, &d); }\n",
        ),
        Spec(
            "libimports_weak_unprefixed.so",
            "extern int aoti_torch_get_numel(void*, long*) __attribute__((weak));\n"
            "int f(void* t) { long n; return aoti_torch_get_numel ? "
            "aoti_torch_get_numel(t, &n) : 0; }\n",
        ),
        Spec(
            "libimports_stable_unprefixed.so",
            "extern int torch_call_dispatcher(void);\n"
            "int f(void) { return torch_call_dispatcher(); }\n",
        ),
        Spec(
            "libimports_prefixed.so",
            f"extern int {p}aoti_torch_get_dim(void*, long*);\n"
            f"int f(void* t) {{ long d; return {p}aoti_torch_get_dim(t, &d); }}\n",
        ),
        # SK001/SK002: a known shim under another prefix; control: unrelated names that
        # contain a family string (no known shim name after them)
        Spec(
            "libimports_other_prefix.so",
            f"extern int {o}aoti_torch_get_dim(void*, long*);\n"
            f"int f(void* t) {{ long d; return {o}aoti_torch_get_dim(t, &d); }}\n",
        ),
        Spec(
            "libshim_other_prefix.so",
            f"int {o}aoti_torch_get_dim(void* t, long* d) {{ (void)t; *d = 1; return 0; }}\n",
        ),
        Spec(
            "libtorchish_names.so",
            "extern int my_torch_helper(void);\n"
            "extern int other_aoti_torch_no_such_shim(void);\n"
            "int mytorch_entry(void) {\n"
            "  return my_torch_helper() + other_aoti_torch_no_such_shim();\n}\n",
        ),
        # SK011: a second library defining the same prefixed shim (control: one of them)
        Spec(
            "libshim_prefixed_twin.so",
            f"int {p}aoti_torch_get_dim(void* t, long* d) {{ (void)t; *d = 2; return 0; }}\n",
        ),
        # SK002 and control (also the SK004 provider)
        Spec(
            "libshim_unprefixed.so",
            "int aoti_torch_get_dim(void* t, long* d) { (void)t; *d = 1; return 0; }\n",
        ),
        Spec(
            "libshim_prefixed.so",
            f"int {p}aoti_torch_get_dim(void* t, long* d) {{ (void)t; *d = 1; return 0; }}\n",
        ),
        # SK003: a fake reference library and an own library colliding with it
        Spec(
            "libreference.so",
            "int shared_entry(void) { return 1; }\nint ref_only(void) { return 2; }\n",
        ),
        Spec("libcollides.so", "int shared_entry(void) { return 3; }\n"),
        Spec("libdistinct.so", "int distinct_entry(void) { return 3; }\n"),
        # SK004: imports a prefixed shim nobody defines
        Spec(
            "libimports_prefixed_missing.so",
            f"extern int {p}aoti_torch_get_sizes(void*, long**);\n"
            f"int f(void* t) {{ long* s; return {p}aoti_torch_get_sizes(t, &s); }}\n",
        ),
        # SK005, SK008 controls: a well-formed blob
        Spec("good.wrapper.so", ENTRY_POINTS_C),
        Spec("needs_torch.wrapper.so", ENTRY_POINTS_C, add_needed=("libtorch_cpu.so",)),
        Spec("needs_c10.wrapper.so", ENTRY_POINTS_C, add_needed=("libc10.so",)),
        # SK006 and control
        Spec(
            "cxx_torch.wrapper.so",
            'namespace c10 { void warn_once(); }\nextern "C" {' + ENTRY_POINTS_C + "}\n"
            '__attribute__((visibility("hidden"))) void g() { c10::warn_once(); }\n',
            language="c++",
        ),
        Spec(
            "cxx_other.wrapper.so",
            'namespace mylib { void warn_once(); }\nextern "C" {' + ENTRY_POINTS_C + "}\n"
            '__attribute__((visibility("hidden"))) void g() { mylib::warn_once(); }\n',
            language="c++",
        ),
        # SK007 and control (control: libdistinct.so, linked noexecstack)
        Spec(
            "libexecstack.so",
            "int h(void) { return 0; }\n",
            flags=("-Wl,-z,execstack",),
        ),
        # SK008: a blob missing Run
        Spec(
            "norun.wrapper.so",
            "int AOTInductorModelContainerCreateWithDevice(void) { return 0; }\n"
            "int AOTInductorModelContainerDelete(void) { return 0; }\n",
        ),
        # SK009 and control (good.wrapper.so)
        Spec(
            "proxy.wrapper.so",
            ENTRY_POINTS_C + f"extern int {p}aoti_torch_proxy_executor_call_function(void*, int);\n"
            f'__attribute__((visibility("hidden"))) int k(void* e) {{\n'
            f"  return {p}aoti_torch_proxy_executor_call_function(e, 0);\n}}\n",
        ),
        # Gate: a library with no dynamic symbols at all (-nostdlib, no exports)
        Spec(
            "libempty.so",
            "static int unused(void) { return 0; }\n",
            flags=("-nostdlib", "-Wl,-z,noexecstack", "-Wl,--hash-style=gnu", "-s"),
        ),
    ]


def build(spec: Spec, out_dir: Path) -> Path:
    suffix = ".cpp" if spec.language == "c++" else ".c"
    source = out_dir / (spec.name.replace(".so", "") + suffix)
    source.write_text(spec.source, encoding="utf-8")
    compiler = "g++" if spec.language == "c++" else "gcc"
    target = out_dir / spec.name
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(target), str(source), *spec.flags],
        check=True,
        capture_output=True,
        text=True,
    )
    for needed in spec.add_needed:
        subprocess.run(
            ["patchelf", "--add-needed", needed, str(target)], check=True, capture_output=True
        )
    return target


def build_all(config: ShimConfig, out_dir: Path) -> dict[str, Path]:
    missing = [tool for tool in ("gcc", "g++", "patchelf") if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(f"fixture tools missing: {', '.join(missing)} (run tools/bootstrap.sh)")
    out_dir.mkdir(parents=True, exist_ok=True)
    return {spec.name: build(spec, out_dir) for spec in specs(config)}
