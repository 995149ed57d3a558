"""`make dist` (tools/dist.py) and the publish-to-BCR templates in .bcr/.

The archive is checked on a throwaway git repository (fast, and changes can be planted):
same commit, same bytes; one changed file, another sha256; the top-level folder and the
checksum files are what WORKSPACE's http_archive and bzlmod's archive_override take. The
real archive of this checkout is built and consumed by tests/bazel/test_adopt.py.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BCR = ROOT / ".bcr"


def _dist() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shimkit_tools_dist", ROOT / "tools" / "dist.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


dist = _dist()


def _git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "rules").mkdir(parents=True)
    module = 'module(\n    name = "shimkit",\n    version = "9.8.7",\n)\n'
    (repo / "MODULE.bazel").write_text(module)
    (repo / "rules" / "defs.bzl").write_text("X = 1\n")
    (repo / ".gitignore").write_text("ignored.txt\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    return repo


def _members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(tar.getnames())


def test_archive_layout_checksums_and_determinism(repo: Path, tmp_path: Path) -> None:
    first = dist.build_archive(tmp_path / "a", "HEAD", root=repo)
    again = dist.build_archive(tmp_path / "b", "HEAD", root=repo)
    assert first.path.name == "shimkit-9.8.7.tar.gz" and first.prefix == "shimkit-9.8.7"
    assert first.path.read_bytes() == again.path.read_bytes()  # same commit, same bytes
    data = first.path.read_bytes()
    assert first.sha256 == hashlib.sha256(data).hexdigest()
    digest = base64.b64decode(first.integrity.removeprefix("sha256-"))
    assert digest == hashlib.sha256(data).digest()
    sums = first.path.with_name(first.path.name + ".sha256").read_text()
    assert sums == f"{first.sha256}  shimkit-9.8.7.tar.gz\n"
    assert _members(first.path) == [
        "shimkit-9.8.7",
        "shimkit-9.8.7/.gitignore",
        "shimkit-9.8.7/MODULE.bazel",
        "shimkit-9.8.7/rules",
        "shimkit-9.8.7/rules/defs.bzl",
    ]


def test_worktree_archive_has_uncommitted_files_and_control(repo: Path, tmp_path: Path) -> None:
    head = dist.build_archive(tmp_path / "head", "HEAD", root=repo)
    snapshot = dist.worktree_commit(repo)
    assert dist.worktree_commit(repo) == snapshot  # same tree, parent and dates: same commit
    clean = dist.build_archive(tmp_path / "clean", snapshot, root=repo)
    assert _members(clean.path) == _members(head.path)
    (repo / "rules" / "defs.bzl").write_text("X = 2\n")
    (repo / "rules" / "new.bzl").write_text("Y = 1\n")
    (repo / "ignored.txt").write_text("not shipped\n")
    status_before = _git(repo, "status", "--porcelain")
    dirty = dist.build_archive(tmp_path / "dirty", dist.worktree_commit(repo), root=repo)
    assert dirty.sha256 != head.sha256  # negative control: a change changes the checksum
    names = _members(dirty.path)
    assert "shimkit-9.8.7/rules/new.bzl" in names and "shimkit-9.8.7/ignored.txt" not in names
    with tarfile.open(dirty.path) as tar:
        member = tar.extractfile("shimkit-9.8.7/rules/defs.bzl")
        assert member is not None and member.read() == b"X = 2\n"
    assert _git(repo, "status", "--porcelain") == status_before  # the real index is untouched
    assert dist.build_archive(tmp_path / "head2", "HEAD", root=repo).sha256 == head.sha256


def test_missing_module_version_is_one_line(repo: Path, tmp_path: Path) -> None:
    (repo / "MODULE.bazel").write_text('module(name = "other")\n')
    with pytest.raises(dist.DistError, match=r"MODULE.bazel: no module\(name = \"shimkit\""):
        dist.build_archive(tmp_path / "out", "HEAD", root=repo)


def test_module_version_is_the_package_version() -> None:
    from importlib.metadata import version

    assert dist.module_version() == version("shimkit")


def test_make_dist_prints_what_consumers_paste(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "dist.py"), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    fields = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    assert set(fields) == {"archive", "strip_prefix", "sha256", "integrity"}
    archive = Path(fields["archive"])
    assert archive.parent == tmp_path and archive.name == f"{fields['strip_prefix']}.tar.gz"
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == fields["sha256"]


# -- .bcr/ (bazel-contrib/publish-to-bcr layout) --------------------------------------


def test_bcr_templates() -> None:
    assert sorted(p.name for p in BCR.iterdir()) == [
        "metadata.template.json",
        "presubmit.yml",
        "source.template.json",
    ]
    metadata = json.loads((BCR / "metadata.template.json").read_text())
    assert {"homepage", "maintainers", "repository", "versions", "yanked_versions"} <= set(metadata)
    assert metadata["versions"] == [] and metadata["maintainers"]
    source = json.loads((BCR / "source.template.json").read_text())
    assert source["integrity"] == ""  # filled in by the publishing app
    # The archive `make dist` uploads to the release: same name and top-level folder.
    version = dist.module_version()
    filled = {
        key: value.replace("{REPO}", "shimkit").replace("{VERSION}", version)
        for key, value in source.items()
    }
    assert filled["strip_prefix"] == f"shimkit-{version}"
    assert filled["url"].endswith(f"/shimkit-{version}.tar.gz")
    presubmit = (BCR / "presubmit.yml").read_text()
    for key in ("matrix:", "tasks:", "build_targets:", "test_targets:", "bazel:"):
        assert key in presubmit
