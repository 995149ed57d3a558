#!/usr/bin/env python3
"""`make dist`: the release archive Bazel consumers download, with its checksums.

Writes build/dist/shimkit-<version>.tar.gz: `git archive` of HEAD under a top-level
`shimkit-<version>/` folder (the layout of GitHub's tag archives, so `strip_prefix` is the
same for both), gzip-compressed without a timestamp, so the same commit always gives the
same bytes. Beside it, `shimkit-<version>.tar.gz.sha256` (`sha256sum -c` format). Prints the
archive's path, the sha256 (WORKSPACE `http_archive(sha256 = ...)`) and the SRI integrity
string (bzlmod `archive_override(integrity = ...)`, BCR source.json).

The version is the `module(version = ...)` of MODULE.bazel (what bzlmod and the BCR see).

`--worktree` archives the working tree as git sees it (tracked files with their current
content plus untracked, not ignored files) instead of HEAD: the tests use it so that they
prove the tree under test, committed or not. The real index is never touched.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "build" / "dist"
NAME = "shimkit"

_MODULE_VERSION = re.compile(r'module\(\s*name\s*=\s*"shimkit"\s*,\s*version\s*=\s*"([^"]+)"')


class DistError(Exception):
    """A one-line reason `make dist` cannot produce the archive."""


@dataclass(frozen=True)
class Archive:
    path: Path
    version: str
    sha256: str

    @property
    def prefix(self) -> str:
        """The archive's top-level folder: `strip_prefix` for http_archive/archive_override."""
        return f"{NAME}-{self.version}"

    @property
    def integrity(self) -> str:
        """The SRI string bzlmod's archive_override and the BCR's source.json take."""
        return "sha256-" + base64.b64encode(bytes.fromhex(self.sha256)).decode("ascii")


def module_version(root: Path = ROOT) -> str:
    """The version in MODULE.bazel's `module(name = "shimkit", version = ...)`."""
    path = root / "MODULE.bazel"
    match = _MODULE_VERSION.search(path.read_text(encoding="utf-8"))
    if match is None:
        raise DistError(f'{path}: no module(name = "shimkit", version = "...") found')
    return match.group(1)


def _git(args: list[str], root: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        raise DistError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def worktree_commit(root: Path = ROOT) -> str:
    """A commit object of the working tree as git sees it, made with a scratch index.

    Its dates are HEAD's, so an unchanged tree gives the same commit (and archive).
    """
    date = _git(["log", "-1", "--format=%cI", "HEAD"], root)
    with tempfile.TemporaryDirectory(prefix="shimkit-dist-") as tmp:
        index = Path(tmp) / "index"
        git_path = ["rev-parse", "--path-format=absolute", "--git-path", "index"]
        real_index = Path(_git(git_path, root))
        if real_index.is_file():
            shutil.copyfile(real_index, index)  # keeps the stat cache: only changed files hashed
        env = {"GIT_INDEX_FILE": str(index)}
        _git(["add", "--all", "."], root, env)
        tree = _git(["write-tree"], root, env)
    identity = {
        "GIT_AUTHOR_NAME": "shimkit dist",
        "GIT_AUTHOR_EMAIL": "dist@shimkit.invalid",
        "GIT_COMMITTER_NAME": "shimkit dist",
        "GIT_COMMITTER_EMAIL": "dist@shimkit.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    return _git(["commit-tree", tree, "-p", "HEAD", "-m", "working tree snapshot"], root, identity)


def build_archive(output_dir: Path, revision: str = "HEAD", root: Path = ROOT) -> Archive:
    """Write shimkit-<version>.tar.gz (+ .sha256) of `revision` into `output_dir`."""
    version = module_version(root)
    prefix = f"{NAME}-{version}/"
    tar = subprocess.run(
        ["git", "archive", "--format=tar", f"--prefix={prefix}", revision],
        cwd=root,
        capture_output=True,
        check=False,
    )
    if tar.returncode != 0:
        raise DistError(f"git archive {revision} failed: {tar.stderr.decode(errors='replace')}")
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"{NAME}-{version}.tar.gz"
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(tar.stdout)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    os.replace(tmp, path)
    path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n", encoding="utf-8")
    return Archive(path, version, digest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--worktree",
        action="store_true",
        help="archive the working tree (tracked + untracked, not ignored) instead of HEAD",
    )
    args = parser.parse_args(argv)
    try:
        revision = worktree_commit() if args.worktree else "HEAD"
        archive = build_archive(args.output_dir, revision)
    except DistError as exc:
        print(f"dist: {exc}", file=sys.stderr)
        return 1
    print(f"archive      {archive.path}")
    print(f"strip_prefix {archive.prefix}")
    print(f"sha256       {archive.sha256}")
    print(f"integrity    {archive.integrity}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
