"""A real default (unprefixed) AOTInductor blob fails the linter; renamed, it passes.

The blob is compiled once with torch on CPU (~20-50 s) in a subprocess and
cached under $SHIMKIT_TEST_CACHE (default: the system temp dir), keyed by the
torch version and this model's source.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from shimkit.config import ShimConfig
from shimkit.exitcodes import EXIT_OTHER_VIOLATION, EXIT_UNPREFIXED

pytestmark = pytest.mark.slow

MODEL = """
import sys
import torch

class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))

torch.manual_seed(0)
program = torch.export.export(Mlp(), (torch.randn(2, 8),))
torch._inductor.aoti_compile_and_package(program, package_path=sys.argv[1])
"""


def _torch_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.fail("torch is not installed in the venv: run tools/bootstrap.sh")
    return out.stdout.strip()


@pytest.fixture(scope="session")
def default_pt2() -> Path:
    key = hashlib.sha256((_torch_version() + MODEL).encode()).hexdigest()[:16]
    base = Path(os.environ.get("SHIMKIT_TEST_CACHE", Path(tempfile.gettempdir()) / "shimkit-test"))
    target = base / f"default-blob-{key}.pt2"
    if not target.is_file():
        base.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp.pt2")
        proc = subprocess.run(
            [sys.executable, "-c", MODEL, str(partial)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        os.replace(partial, target)
    return target


@pytest.fixture(scope="session")
def extracted_so(default_pt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("blob")
    with zipfile.ZipFile(default_pt2) as archive:
        members = [n for n in archive.namelist() if n.endswith(".wrapper.so")]
        assert len(members) == 1, members
        target = out / Path(members[0]).name
        target.write_bytes(archive.read(members[0]))
    return target


@pytest.fixture(scope="session")
def renamed_so(
    extracted_so: Path, config: ShimConfig, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The extracted blob with every unprefixed import renamed and NEEDED libtorch removed."""
    import lief

    binary = lief.parse(str(extracted_so))
    assert binary is not None
    renamed = 0
    for symbol in binary.imported_symbols:
        if config.is_family(symbol.name):
            symbol.name = config.prefixed(symbol.name)
            renamed += 1
    assert renamed >= 20
    for library in list(binary.libraries):
        if library.startswith(("libtorch", "libc10")):
            binary.remove_library(library)
    for segment in binary.segments:  # what `patchelf --clear-execstack` (>= 0.18) does
        if segment.type == lief.ELF.Segment.TYPE.GNU_STACK:
            segment.flags = lief.ELF.Segment.FLAGS.R | lief.ELF.Segment.FLAGS.W
    out = tmp_path_factory.mktemp("renamed") / extracted_so.name
    binary.write(str(out))
    return out


def _lint_json(run_shimkit, *args: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def,type-arg]
    proc = run_shimkit(["lint", "--no-reference", "--format", "json", *args])
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _rules(document: dict) -> set[str]:  # type: ignore[type-arg]
    """The rules with error findings (warnings such as SK010 set no exit bit)."""
    return {
        f["rule"] for a in document["artifacts"] for f in a["findings"] if f["severity"] == "error"
    }


def test_default_blob_fails_as_pt2(run_shimkit, default_pt2: Path) -> None:  # type: ignore[no-untyped-def]
    code, document = _lint_json(run_shimkit, str(default_pt2))
    assert code & EXIT_UNPREFIXED and code & EXIT_OTHER_VIOLATION
    [artifact] = document["artifacts"]
    assert "!" in artifact["location"] and artifact["location"].endswith(".wrapper.so")
    assert artifact["role"] == "blob"
    assert {"SK001", "SK005"} <= _rules(document)
    symbols = {f["symbol"] for f in artifact["findings"] if f["rule"] == "SK001"}
    assert {"aoti_torch_empty_strided", "aoti_torch_get_data_ptr"} <= symbols


def test_default_blob_fails_as_extracted_so(run_shimkit, extracted_so: Path) -> None:  # type: ignore[no-untyped-def]
    code, document = _lint_json(run_shimkit, str(extracted_so))
    assert code & EXIT_UNPREFIXED
    assert {"SK001", "SK005"} <= _rules(document)
    assert document["artifacts"][0]["role"] == "blob"


def test_renamed_blob_passes(run_shimkit, renamed_so: Path, extracted_so: Path) -> None:  # type: ignore[no-untyped-def]
    code, document = _lint_json(run_shimkit, str(renamed_so))
    assert _rules(document) == set(), document
    assert code == 0
    # negative control: the same command on the original blob fails
    original, _ = _lint_json(run_shimkit, str(extracted_so))
    assert original != 0


def test_in_process_lint_of_the_blob(extracted_so: Path, config: ShimConfig) -> None:
    from shimkit.checks import LintContext, lint_image
    from shimkit.elf import read_elf

    image = read_elf(extracted_so.read_bytes(), str(extracted_so))
    findings = lint_image(image, LintContext(config=config))
    assert {f.rule_id for f in findings} >= {"SK001", "SK005"}


def test_cache_location_is_outside_the_repo(default_pt2: Path, repo_root: Path) -> None:
    assert repo_root not in default_pt2.parents
