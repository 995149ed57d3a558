"""A foreign consumer (examples/acme) adopts shimkit from OUTSIDE this checkout.

Shared by the paths of the adoption tests (docs/adopting.md):
- `wheel`: shimkit's manylinux wheel (tools/build_wheel.py, reused per source state);
- `fresh_venv`: a new venv in a temp directory with only that wheel (and its PyPI
  dependencies) installed: no checkout, no compiler needed at run time;
- `acme`: examples/acme copied to a temp directory (a git repository of its own), with
  its model compiled for acme's prefix by `shimkit compile` run from acme's directory;
- `acme_cmake`: acme configured, built and tested with CMake and the wheel's CMake
  package (path c), whose libacme_shims.so the other paths reuse.
Negative controls change acme's prefix file (not its blob or library): `with_prefix`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACME = ROOT / "examples" / "acme"
CACHE = ROOT / "build" / "adopt"
DEV_SHIMKIT = Path(sys.executable).parent / "shimkit"
sys.path.insert(0, str(ROOT / "tools"))

import build_wheel  # noqa: E402

# How long each path takes (printed at the end of the session; docs/benchmarks.md).
TIMINGS: dict[str, float] = {}


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        """An environment with only this venv's bin/ ahead of the system's (no .venv)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SHIMKIT_", "VIRTUAL_ENV"))}
        path = [p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))]
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env["VIRTUAL_ENV"] = str(self.root)
        env.update(extra)
        return env


def run(
    argv: Sequence[str | Path], cwd: Path, env: dict[str, str] | None = None, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, (
        f"{proc.args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


class timed:
    """Adds the time of a `with` block to TIMINGS[name]."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        TIMINGS[self.name] = TIMINGS.get(self.name, 0.0) + time.perf_counter() - self.start


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("adoption paths: seconds")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name:32s} {seconds:7.1f}")


def with_prefix(prefix_file: Path, prefix: str) -> str:
    """Rewrite the SHIM_SYMBOL_PREFIX line of a prefix file; returns the old prefix."""
    lines = prefix_file.read_text(encoding="utf-8").splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.startswith("SHIM_SYMBOL_PREFIX = ")]
    old = lines[index].split('"')[1]
    lines[index] = f'SHIM_SYMBOL_PREFIX = "{prefix}"'
    prefix_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return old


def exports(path: Path) -> set[str]:
    out = ok(run(["nm", "-D", "--defined-only", path], cwd=path.parent)).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.fixture(scope="session")
def wheel() -> Path:
    with timed("wheel (pip wheel + auditwheel)"):
        try:
            return build_wheel.build_wheel(CACHE / "dist")
        except build_wheel.WheelError as exc:
            pytest.fail(str(exc))


@pytest.fixture(scope="session")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("consumer-venv") / "venv"
    assert not root.resolve().is_relative_to(ROOT)
    with timed("fresh venv + pip install wheel"):
        venv.EnvBuilder(with_pip=True).create(root)
        made = Venv(root)
        ok(run([made.bin / "pip", "install", "-q", wheel], cwd=root.parent, env=made.env()))
    return made


def _acme_blob() -> Path:
    """acme's model compiled for acme's prefix, by the development shimkit (torch) run from
    a copy of acme (cached: the model, acme's prefix file, the rename header, torch)."""
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for part in ("models/tiny_mlp.py", "shim_symbol_prefix.bzl", ".shimkit.toml"):
        digest.update((ACME / part).read_bytes())
    digest.update((ROOT / "shims" / "aoti_shim_rename.h").read_bytes())
    blob = CACHE / f"tiny_mlp-{digest.hexdigest()[:12]}.pt2"
    if not blob.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        work = CACHE / f"compile-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(ACME, work)
        env = {k: v for k, v in os.environ.items() if k != "SHIMKIT_CONFIG"}
        out = work / "tiny_mlp.pt2"
        ok(run([DEV_SHIMKIT, "compile", "models/tiny_mlp.py", "-o", out], cwd=work, env=env))
        os.replace(out, blob)
        shutil.rmtree(work)
    return blob


@pytest.fixture(scope="session")
def acme_blob() -> Path:
    with timed("compile acme's model"):
        return _acme_blob()


def copy_acme(dest: Path, blob: Path) -> Path:
    """examples/acme as its own git repository at `dest` (outside the checkout), with its
    compiled model in models/."""
    assert not dest.resolve().is_relative_to(ROOT)
    shutil.copytree(ACME, dest)
    shutil.copyfile(blob, dest / "models" / "tiny_mlp.pt2")
    return dest


def git_commit_all(repo: Path, message: str) -> str:
    """Commit everything in `repo` (made a repository if needed); returns the commit. Fixed
    names and dates: the same tree gives the same commit."""
    env = dict(os.environ, GIT_AUTHOR_NAME="acme", GIT_AUTHOR_EMAIL="acme@example.com")
    env.update(GIT_COMMITTER_NAME="acme", GIT_COMMITTER_EMAIL="acme@example.com")
    env.update(GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    if not (repo / ".git").exists():
        ok(run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env))
    ok(run(["git", "add", "-A"], cwd=repo, env=env))
    ok(run(["git", "commit", "-q", "--allow-empty", "-m", message], cwd=repo, env=env))
    return ok(run(["git", "rev-parse", "HEAD"], cwd=repo, env=env)).stdout.strip()


@pytest.fixture(scope="session")
def shimkit_snapshot() -> tuple[Path, str]:
    """This working tree as a repository of one commit: what pre-commit clones. (try-repo's
    own snapshot of uncommitted changes leaves out new files.) At a fixed path with a
    reproducible commit, so pre-commit's store (build/adopt) reuses its environment while
    the sources stay the same."""
    listed = ok(
        run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    ).stdout
    snapshot = CACHE / "shimkit-snapshot"
    shutil.rmtree(snapshot, ignore_errors=True)
    for relpath in filter(None, listed.split("\0")):
        source = ROOT / relpath
        if source.is_file() and not source.is_symlink():
            (snapshot / relpath).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / relpath)
    return snapshot, git_commit_all(snapshot, "shimkit working tree")


@dataclass(frozen=True)
class CMakeBuild:
    source: Path
    build: Path
    shims: Path  # libacme_shims.so


def cmake_configure_build(source: Path, build: Path, toolenv: Venv) -> CMakeBuild:
    env = toolenv.env()
    cmake_dir = ok(run(["shimkit", "config", "--cmake-dir"], cwd=source, env=env)).stdout.strip()
    ok(
        run(
            ["cmake", "-S", source, "-B", build, "-G", "Ninja", f"-Dshimkit_DIR={cmake_dir}"],
            cwd=source,
            env=env,
        )
    )
    ok(run(["cmake", "--build", build], cwd=source, env=env))
    return CMakeBuild(source, build, build / "libacme_shims.so")


@pytest.fixture(scope="session")
def acme_cmake(
    fresh_venv: Venv, acme_blob: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CMakeBuild]:
    source = copy_acme(tmp_path_factory.mktemp("acme-cmake") / "acme", acme_blob)
    with timed("CMake consumer: configure + build"):
        built = cmake_configure_build(source, source / "build", fresh_venv)
    yield built
