"""What a distribution needs: one version, a license, type information, valid hook metadata.

The version lives in lint/shimkit/__init__.py only: pyproject.toml reads it (scikit-build-core's
regex provider), CMakeLists.txt reads it, SARIF help links use it; MODULE.bazel cannot read a
Python file, so this test holds it equal, and CHANGELOG.md must have its section.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import shimkit
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def module_bazel_version(text: str) -> str | None:
    match = re.search(r'module\(\s*name\s*=\s*"shimkit",.*?version\s*=\s*"([^"]+)"', text, re.S)
    return match.group(1) if match else None


def test_one_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    regex = project["tool"]["scikit-build"]["metadata"]["version"]
    assert regex["input"] == "lint/shimkit/__init__.py"
    assert module_bazel_version((ROOT / "MODULE.bazel").read_text()) == shimkit.__version__
    assert f"## {shimkit.__version__}" in (ROOT / "CHANGELOG.md").read_text()
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert (
        "lint/shimkit/__init__.py" in cmake
        and "project(shimkit VERSION ${SHIMKIT_VERSION}" in cmake
    )
    assert f"/v{shimkit.__version__}/docs/" in shimkit.DOCS_URL


def test_version_check_catches_a_stale_module_bazel() -> None:
    """Negative control for the comparison above."""
    stale = 'module(\n    name = "shimkit",\n    version = "0.0.9",\n)\n'
    assert module_bazel_version(stale) == "0.0.9" != shimkit.__version__


def test_license_and_types() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "BSD-3-Clause"
    assert project["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Neither the name" in text
    assert (ROOT / "lint" / "shimkit" / "py.typed").is_file()


def test_pre_commit_manifest_is_valid() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", ".pre-commit-hooks.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
