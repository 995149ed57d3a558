"""Compile-time closure: `shimkit compile --target T` checks each blob against T's shims
before it writes the package (the linter's SK004 with T's names as the provider).

Fast tests build images by hand (no torch compile); the slow one compiles a real model
using an op the slim CPU shims lack (torch.gcd): it fails naming the op and the fix,
writes nothing, and compiles for --target libtorch (torch's runner has the op); another
(an embedding with max_norm) leaves an op to libtorch's proxy executor and fails naming it.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from shimkit.aot.compile import blob_problems, problems_line
from shimkit.aot.targets import TARGETS, provided_names, target_named
from shimkit.checks.companions import proxy_executor_ops
from shimkit.config import ShimConfig
from shimkit.elf import ElfImage, Symbol
from shimkit.errors import ShimkitError
from shimkit.runtime.build import build

ENTRIES = [
    "AOTInductorModelContainerCreateWithDevice",
    "AOTInductorModelContainerDelete",
    "AOTInductorModelContainerRun",
]
GCD = "aoti_torch_cpu_gcd"
GCD_MODEL = """
import torch

class Divisors(torch.nn.Module):
    def forward(self, a, b):
        return torch.gcd(a, b) + 1

model = Divisors()
example_inputs = (torch.arange(1, 17), torch.full((16,), 12))
"""


def blob(config: ShimConfig, imports: list[str]) -> ElfImage:
    """A prefixed blob image importing `imports` (bare shim names, prefixed here)."""
    return ElfImage(
        location="model.pt2!m/data/aotinductor/model/x.wrapper.so",
        elf_class=64,
        little_endian=True,
        e_type="DYN",
        machine="EM_X86_64",
        imports=[
            Symbol(config.prefixed(n), None, "GLOBAL", "NOTYPE", False) for n in sorted(imports)
        ],
        exports=[Symbol(n, None, "GLOBAL", "FUNC", True) for n in ENTRIES],
        needed=["libc.so.6"],
        soname=None,
        exec_stack=False,
        size=1,
        symbol_table=".dynsym",
        symbol_count=len(imports) + len(ENTRIES),
    )


@pytest.fixture(scope="module")
def slim_cpu(config: ShimConfig) -> frozenset[str]:
    return provided_names(TARGETS["slim-cpu"], config)


def test_slim_cpu_names_are_the_built_librarys_prefixed_exports(
    config: ShimConfig, slim_cpu: frozenset[str]
) -> None:
    assert config.prefixed("aoti_torch_get_dim") in slim_cpu
    assert config.prefixed(GCD) not in slim_cpu
    assert all(config.is_prefixed_family(n) for n in slim_cpu) and len(slim_cpu) > 50


def test_libtorch_names_are_torchs_shims_prefixed(config: ShimConfig) -> None:
    names = provided_names(TARGETS["libtorch"], config)
    assert config.prefixed(GCD) in names and config.prefixed("aoti_torch_get_dim") in names
    assert config.prefixed("aoti_torch_no_such_shim") not in names


def test_libraries_of_another_prefix_are_named_not_every_shim(
    config: ShimConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An adopter's prefix file (acme_) with libraries built for shimkit's default prefix (a
    # wheel's, or $SHIMKIT_LIB_DIR at another project's build): one line naming both
    # prefixes and how to get acme_'s, not every shim the blob imports called missing.
    monkeypatch.setenv("SHIMKIT_LIB_DIR", str(build("release").runtime.parent))
    acme = config.with_prefix("acme_", "an adopter's prefix file")
    with pytest.raises(ShimkitError) as raised:
        provided_names(TARGETS["slim-cpu"], acme)
    line = str(raised.value)
    assert f"serve prefix {config.prefix}, not acme_" in line and "$SHIMKIT_LIB_DIR" in line
    assert "\n" not in line
    # Control: the same libraries serve the default prefix's names.
    assert config.prefixed("aoti_torch_get_dim") in provided_names(TARGETS["slim-cpu"], config)


def test_missing_shims_are_named_with_the_fix(config: ShimConfig, slim_cpu: frozenset[str]) -> None:
    target = TARGETS["slim-cpu"]
    clean = blob(config, ["aoti_torch_get_dim", "aoti_torch_get_data_ptr"])
    assert blob_problems(clean, config, target, slim_cpu) == []  # positive control
    image = blob(config, ["aoti_torch_get_dim", GCD, "aoti_torch_cpu_zzz_made_up"])
    found = blob_problems(image, config, target, slim_cpu)
    assert [f.rule_id for f in found] == ["SK004", "SK004"]
    line = problems_line(image, found, target)
    assert config.prefixed(GCD) in line and config.prefixed("aoti_torch_cpu_zzz_made_up") in line
    assert "--target libtorch" in line and "\n" not in line
    assert blob_problems(image, config, None, None) == []  # no target: no closure check


def test_the_proxy_executor_is_fine_only_for_libtorch(config: ShimConfig) -> None:
    proxy = "aoti_torch_proxy_executor_call_function"
    image = blob(config, [proxy])
    names = frozenset({config.prefixed(proxy)})
    slim = [f.rule_id for f in blob_problems(image, config, TARGETS["slim-cpu"], names)]
    assert slim == ["SK009"]
    assert blob_problems(image, config, TARGETS["libtorch"], names) == []


def test_ops_left_to_the_proxy_executor_are_named(config: ShimConfig) -> None:
    proxy = "aoti_torch_proxy_executor_call_function"
    image = blob(config, [proxy])
    found = blob_problems(image, config, TARGETS["slim-cpu"], frozenset())
    line = problems_line(image, found, TARGETS["slim-cpu"], ["aten::embedding_renorm"])
    assert "1 op(s) have no C shim" in line and "aten::embedding_renorm" in line
    assert "--target libtorch" in line and "SK009" not in line
    # Control: with no op names (a package without the executor's node list) the
    # linter's own SK009 message stands.
    assert "SK009" in problems_line(image, found, TARGETS["slim-cpu"], None)


def test_proxy_executor_ops_come_from_the_json_beside_each_blob(tmp_path: Path) -> None:
    package = tmp_path / "m.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        for stem, text in (
            ("m/data/aotinductor/model/a.wrapper", json.dumps({"nodes": [
                {"name": "buf0", "node": {"target": "aten::embedding_renorm"}},
                {"name": "buf2", "node": {"target": "aten::_unique2"}},
                {"name": "buf3", "node": {"target": "aten::embedding_renorm"}},
            ]})),
            ("m/data/aotinductor/model/b.wrapper", "not json"),
            ("m/data/aotinductor/model/c.wrapper", json.dumps({"nodes": []})),
        ):  # fmt: skip
            archive.writestr(f"{stem}.so", b"\x7fELF")
            archive.writestr(f"{stem}.json", text)
    assert proxy_executor_ops(package) == {
        "m/data/aotinductor/model/a.wrapper.so": ["aten::_unique2", "aten::embedding_renorm"]
    }


def test_lint_names_the_ops_left_to_the_proxy_executor(tmp_path: Path, config: ShimConfig) -> None:
    """`shimkit lint` on a .pt2: SK009 names the ops from the node list beside the blob,
    as compile does. Control: a blob with no node list keeps the rule's own message."""
    from dataclasses import replace

    from shimkit.checks.engine import ArtifactResult, LintResult
    from shimkit.checks.model import Role
    from shimkit.checks.run import name_proxy_executor_ops

    package = tmp_path / "m.pt2"
    nodes = {"nodes": [{"name": "buf0", "node": {"target": "aten::embedding_renorm"}}]}
    with zipfile.ZipFile(package, "w") as archive:
        for stem in ("a", "b"):
            archive.writestr(f"m/data/aotinductor/model/{stem}.wrapper.so", b"\x7fELF")
        archive.writestr("m/data/aotinductor/model/a.wrapper.json", json.dumps(nodes))
    result = LintResult()
    for stem in ("a", "b"):
        image = replace(
            blob(config, ["aoti_torch_proxy_executor_call_function"]),
            location=f"{package}!m/data/aotinductor/model/{stem}.wrapper.so",
        )
        found = blob_problems(image, config, TARGETS["slim-cpu"], frozenset())
        result.artifacts.append(ArtifactResult(image.location, Role.BLOB, image, found))
    name_proxy_executor_ops(result)
    named, unnamed = (
        [f.message for f in a.findings if f.rule_id == "SK009"] for a in result.artifacts
    )
    assert named == [
        f"imports {config.prefixed('aoti_torch_proxy_executor_call_function')}: 1 op(s) have "
        "no C shim and need libtorch's proxy executor: aten::embedding_renorm"
    ]
    assert unnamed and "an op has no C shim" in unnamed[0] and "aten::" not in unnamed[0]


def test_unknown_target_is_one_line() -> None:
    with pytest.raises(ShimkitError, match=r"unknown compile target 'gpu'.*slim-cpu"):
        target_named("gpu")


@pytest.mark.slow
def test_a_model_the_slim_shims_cannot_serve_fails_compile(
    tmp_path: Path, config: ShimConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from shimkit.cli import main

    model = tmp_path / "divisors.py"
    model.write_text(GCD_MODEL)
    out = tmp_path / "divisors.pt2"
    assert main(["compile", str(model), "-o", str(out)]) == 1  # --target slim-cpu
    err = capsys.readouterr().err
    [line] = [ln for ln in err.splitlines() if ln.startswith("shimkit: error: ")]
    assert config.prefixed(GCD) in line and "--target libtorch" in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["divisors.py"]
    # Positive control: torch's runner has the op, so the libtorch target compiles.
    assert main(["compile", str(model), "-o", str(out), "--target", "libtorch"]) == 0
    assert "--target libtorch" in capsys.readouterr().out and out.is_file()


RENORM_MODEL = """
import torch


class Tied(torch.nn.Module):
    # A norm-limited embedding tied to its output projection: compile leaves the renorm
    # alone there (shimkit.aot.embedding), and no torch has a C shim for it.
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(20, 8, max_norm=1.0)

    def forward(self, ids):
        return self.table(ids) @ self.table.weight.T


model = Tied()
example_inputs = (torch.tensor([[1, 2, 3]]),)
"""


@pytest.mark.slow
def test_an_op_without_a_c_shim_fails_compile_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from shimkit.cli import main

    model = tmp_path / "renorm.py"
    model.write_text(RENORM_MODEL)
    assert main(["compile", str(model), "-o", str(tmp_path / "renorm.pt2")]) == 1
    [line] = [
        ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("shimkit: error: ")
    ]
    assert "need libtorch's proxy executor" in line and "aten::embedding_renorm" in line


@pytest.mark.slow
def test_slim_cuda_names_come_from_the_cuda_shim_library(config: ShimConfig) -> None:
    """The CUDA shim library builds without a GPU; its prefixed exports are the names."""
    names = provided_names(TARGETS["slim-cuda"], config)
    assert config.prefixed("aoti_torch_create_cuda_stream_guard") in names
    assert config.prefixed("aoti_torch_get_dim") in names  # the shared shim core
    assert config.prefixed(GCD) not in names
