"""Real models on CPU, both ways: `shimkit compile` and `shimkit rewrite` of a default blob.

Checks the imports (all shim imports prefixed, none unprefixed, no NEEDED
libtorch, no executable stack) and that torch's own runner, given the
forwarding library, computes what eager PyTorch computes (within 1e-5), in a
subprocess so the forwarder's global symbols never reach other tests.
Torch compiles are slow (15-50 s each), so each artifact is built once per
session: 3 prefixed compiles and 2 default ones.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from shimkit.aot.pt2 import read_blobs
from shimkit.checks.blob import PREFIXED_BLOB_RULES, blob_findings, read_blob_image
from shimkit.config import ShimConfig
from shimkit.elf import ElfImage

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"
# Shim imports a model must have (beyond the ones every blob has).
EXPECTED_IMPORT = {
    "mlp": ["aoti_torch_cpu_addmm_out"],
    "convnet": ["aoti_torch_cpu_convolution"],
    "topk": ["aoti_torch_cpu_topk", "aoti_torch_cpu_sort_stable"],
}
COMPILED = ["mlp", "convnet", "topk"]
# (model, rewrite engine): both engines on the MLP; no extra compiles.
REWRITTEN = [("mlp", "lief"), ("mlp", "patch"), ("topk", "lief")]


@dataclass
class Example:
    model: Any
    inputs: tuple[Any, ...]


def load_example(name: str) -> Example:
    namespace = runpy.run_path(str(MODELS / f"{name}.py"))
    return Example(namespace["model"], tuple(namespace["example_inputs"]))


def blob_of(path: Path, config: ShimConfig) -> ElfImage:
    [(member, data)] = read_blobs(path).items()
    return read_blob_image(data, f"{path}:{member}")


def names(symbols: list) -> list[str]:  # type: ignore[type-arg]
    return [s.name for s in symbols]


class Artifacts:
    """Builds each package at most once per session."""

    def __init__(self, work: Path, config: ShimConfig) -> None:
        self.work = work
        self.config = config
        self.cache: dict[tuple[str, str], Path] = {}

    def prefixed(self, name: str) -> Path:
        key = ("compiled", name)
        if key not in self.cache:
            out = self.work / f"{name}.prefixed.pt2"
            from shimkit.cli import main

            if name == "mlp":  # the CLI from a model file
                assert main(["compile", str(MODELS / "mlp.py"), "-o", str(out)]) == 0
            elif name == "convnet":  # the CLI from a saved ExportedProgram
                example = load_example(name)
                saved = self.work / f"{name}.exported.pt2"
                torch.export.save(torch.export.export(example.model, example.inputs), str(saved))
                assert main(["compile", str(saved), "-o", str(out)]) == 0
            else:  # the Python API
                from shimkit.aot.compile import compile_model

                example = load_example(name)
                compile_model(example.model, example.inputs, out, config=self.config)
            self.cache[key] = out
        return self.cache[key]

    def default(self, name: str) -> Path:
        key = ("default", name)
        if key not in self.cache:
            example = load_example(name)
            exported = torch.export.export(example.model, example.inputs)
            out = self.work / f"{name}.default.pt2"
            torch._inductor.aoti_compile_and_package(exported, package_path=str(out))
            self.cache[key] = out
        return self.cache[key]

    def rewritten(self, name: str, engine: str = "lief") -> Path:
        key = (f"rewritten-{engine}", name)
        if key not in self.cache:
            from shimkit.cli import main

            out = self.work / f"{name}.rewritten-{engine}.pt2"
            argv = ["rewrite", str(self.default(name)), "-o", str(out), "--engine", engine]
            assert main(argv) == 0
            self.cache[key] = out
        return self.cache[key]


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory, config: ShimConfig) -> Artifacts:
    return Artifacts(tmp_path_factory.mktemp("aot_models"), config)


@pytest.fixture(scope="session")
def forwarder(config: ShimConfig) -> Path:
    """Built here, loaded only in run_packages.py's process (see there why)."""
    from shimkit.aot.forward import build_forwarding_library
    from shimkit.header import find_torch, shim_names

    return build_forwarding_library(shim_names(find_torch().include_dir), config)


PERTURBED_MLP = """
import runpy, torch
namespace = runpy.run_path({path!r})
model, example_inputs = namespace["model"], namespace["example_inputs"]
with torch.no_grad():
    model[0].bias.add_(1e-3)
"""


def pair(package: Path, model_file: Path) -> str:
    return f"{package}={model_file}"


@pytest.fixture(scope="session")
def numerics(
    artifacts: Artifacts, forwarder: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """Outputs vs eager for every package, from one subprocess (one torch import)."""
    pairs = [pair(artifacts.prefixed(name), MODELS / f"{name}.py") for name in COMPILED]
    pairs += [
        pair(artifacts.rewritten(name, engine), MODELS / f"{name}.py") for name, engine in REWRITTEN
    ]
    perturbed = tmp_path_factory.mktemp("perturbed") / "mlp_perturbed.py"
    perturbed.write_text(PERTURBED_MLP.format(path=str(MODELS / "mlp.py")))
    pairs.append(pair(artifacts.prefixed("mlp"), perturbed))  # the negative control
    argv = [sys.executable, str(Path(__file__).with_name("run_packages.py")), str(forwarder)]
    proc = subprocess.run([*argv, *pairs], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results: dict[str, dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    results["control"] = results[pairs[-1]]
    return results


def assert_prefixed_blob(info: ElfImage, config: ShimConfig, name: str) -> None:
    assert blob_findings(info, config, rules=PREFIXED_BLOB_RULES) == []
    shim_imports = [s for s in names(info.imports) if config.is_prefixed_family(s)]
    assert len(shim_imports) >= 21  # every CPU blob imports at least 21 shims
    for needed in ["aoti_torch_get_data_ptr", *EXPECTED_IMPORT[name]]:
        assert config.prefixed(needed) in shim_imports
    assert not [s for s in info.imports + info.exports if config.is_family(s.name)]
    assert not [n for n in info.needed if n.startswith(("libtorch", "libc10"))]
    assert not info.exec_stack


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_blob_imports_only_prefixed_names(
    name: str, artifacts: Artifacts, config: ShimConfig
) -> None:
    info = blob_of(artifacts.prefixed(name), config)
    assert_prefixed_blob(info, config, name)
    assert info.exports and all(e.startswith("AOTInductor") for e in names(info.exports))


@pytest.mark.parametrize(("name", "engine"), REWRITTEN)
def test_rewritten_blob_imports_the_default_blobs_names_prefixed(
    name: str, engine: str, artifacts: Artifacts, config: ShimConfig
) -> None:
    default = blob_of(artifacts.default(name), config)
    # Negative control: the default blob fails the very check the rewrite must pass.
    findings = blob_findings(default, config, rules=PREFIXED_BLOB_RULES)
    problems = " ".join(f.message for f in findings)
    assert "imports unprefixed shim symbol" in problems and "NEEDED libtorch_cpu.so" in problems
    rewritten = blob_of(artifacts.rewritten(name, engine), config)
    assert_prefixed_blob(rewritten, config, name)
    unprefixed_before = sorted(s for s in names(default.imports) if config.is_family(s))
    prefixed_after = sorted(s for s in names(rewritten.imports) if config.is_prefixed_family(s))
    assert prefixed_after == [config.prefixed(s) for s in unprefixed_before]
    assert names(rewritten.exports) == names(default.exports)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_outputs_match_eager(
    name: str, artifacts: Artifacts, numerics: dict[str, dict[str, Any]]
) -> None:
    result = numerics[pair(artifacts.prefixed(name), MODELS / f"{name}.py")]
    assert result["ok"], result["detail"]


@pytest.mark.parametrize(("name", "engine"), REWRITTEN)
def test_rewritten_outputs_match_eager(
    name: str, engine: str, artifacts: Artifacts, numerics: dict[str, dict[str, Any]]
) -> None:
    result = numerics[pair(artifacts.rewritten(name, engine), MODELS / f"{name}.py")]
    assert result["ok"], result["detail"]


def test_numerics_check_catches_a_wrong_model(numerics: dict[str, dict[str, Any]]) -> None:
    """Negative control: eager weights off by 1e-3 must fail the comparison."""
    assert not numerics["control"]["ok"]
    assert "AssertionError" in numerics["control"]["detail"]


def test_prefixed_blob_needs_a_provider(artifacts: Artifacts, config: ShimConfig) -> None:
    """Negative control for the forwarding library: without it the blob cannot load."""
    package = artifacts.prefixed("mlp")
    code = f"import torch; torch._inductor.aoti_load_package({str(package)!r}); print('loaded')"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ)
    )
    assert proc.returncode != 0 and "loaded" not in proc.stdout
    assert f"undefined symbol: {config.prefix}aoti_torch_" in proc.stderr


def test_the_linter_agrees(artifacts: Artifacts, capsys: pytest.CaptureFixture[str]) -> None:
    """`shimkit lint` fails the default blob and passes the compiled and rewritten ones."""
    from shimkit.cli import COMMANDS, main

    if "lint" not in COMMANDS:
        pytest.skip("shimkit lint is not part of this checkout")
    assert main(["lint", str(artifacts.default("mlp"))]) != 0
    assert main(["lint", str(artifacts.prefixed("mlp"))]) == 0
    assert main(["lint", str(artifacts.rewritten("mlp"))]) == 0
    capsys.readouterr()
