"""The acme consumer outside the checkout and the two Bazels that build it (test_adopt.py).

`Consumer` is a copy of examples/acme in a temporary directory with the release archive's
URL and checksums filled in and its blob in place. `HostBazel` is Debian's Bazel 4.2.3
(WORKSPACE); `ChrootBazel` is Debian sid's Bazel 7 (bzlmod) inside tools/bazel7_chroot.sh.
Both resolve everything offline: the flags in `offline_flags` point the repositories and
modules that Bazel would download at the machine's Debian packages and at shimkit's stubs
(environment, not part of what a consumer writes). `execution_log` reads
`--execution_log_json_file` to tell cache hits from executed actions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bazel_testlib import ROOT, defined_dynamic_symbols, normalize_label

ACME = ROOT / "examples" / "acme"
CHROOT_SCRIPT = ROOT / "tools" / "bazel7_chroot.sh"
CHROOT = Path(os.environ.get("SHIMKIT_CHROOT", ROOT / "build" / "bazel7-sid"))
BLOB_NAME = "tiny_mlp.pt2"
BLOB_CACHE = ROOT / "build" / "adopt-blobs"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
# The offline stand-ins Bazel would otherwise download (see third_party/*/README.md).
STUBS = ("rules_cc_stub", "remote_coverage_tools_stub", "bzlmod_stubs")
DEBIAN_REPOSITORIES = {
    "bazel_skylib": "/usr/share/bazel/tools/skylib",
    "platforms": "/usr/share/bazel/tools/platforms",
    "rules_java": "/usr/share/bazel/rules/java",
}
BZLMOD_STUB_MODULES = ("apple_support", "buildozer", "protobuf", "zlib")


# -- the consumer ---------------------------------------------------------------------


def tool_module(name: str) -> object:
    """A module of tools/ (not a package), e.g. dist."""
    import importlib.util

    path = ROOT / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"shimkit_tools_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def acme_blob() -> Path:
    """acme's model compiled for acme's prefix with the CLI, as acme's README says (cached)."""
    import torch

    digest = hashlib.sha256()
    for part in (
        (ACME / "models" / "tiny_mlp.py").read_bytes(),
        (ACME / "shim_symbol_prefix.bzl").read_bytes(),
        (ROOT / "shims" / "aoti_shim_rename.h").read_bytes(),
        torch.__version__.encode(),
    ):
        digest.update(part)
    cached = BLOB_CACHE / f"tiny_mlp-{digest.hexdigest()[:12]}.pt2"
    if cached.is_file():
        return cached
    BLOB_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shimkit-acme-blob-") as tmp:
        work = Path(tmp) / "acme"
        shutil.copytree(ACME, work)
        proc = subprocess.run(
            [
                str(Path(sys.executable).parent / "shimkit"),
                *("--config", "shim_symbol_prefix.bzl"),
                *("compile", "models/tiny_mlp.py", "-o", BLOB_NAME),
            ],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(f"shimkit compile of acme's model failed:\n{proc.stderr[-3000:]}")
        tmp_blob = cached.with_name(cached.name + f".tmp{os.getpid()}")
        shutil.copyfile(work / BLOB_NAME, tmp_blob)
        os.replace(tmp_blob, cached)
    return cached


@dataclass(frozen=True)
class Release:
    """The archive `make dist` makes, as the consumer's WORKSPACE/MODULE.bazel name it."""

    archive: Path  # a path the Bazel that downloads it can read
    version: str
    sha256: str
    integrity: str

    @property
    def strip_prefix(self) -> str:
        return f"shimkit-{self.version}"


@dataclass(frozen=True)
class Consumer:
    """A copy of examples/acme (host path `root`), ready to build."""

    root: Path

    @classmethod
    def create(cls, parent: Path, name: str, release: Release, url: str, blob: Path) -> Consumer:
        root = parent / name
        shutil.copytree(ACME, root)
        for filename in ("WORKSPACE", "MODULE.bazel"):
            path = root / filename
            text = path.read_text(encoding="utf-8")
            for needle, want in (
                ('strip_prefix = "shimkit-', f'strip_prefix = "{release.strip_prefix}"'),
                ('name = "shimkit", version = "', f'version = "{release.version}"'),
            ):
                if needle in text:
                    assert want in text, f"examples/acme/{filename} must name shimkit {want}"
            text = (
                text.replace("@SHIMKIT_URL@", url)
                .replace("@SHIMKIT_SHA256@", release.sha256)
                .replace("@SHIMKIT_INTEGRITY@", release.integrity)
            )
            assert "@SHIMKIT_" not in text, f"an unfilled placeholder in examples/acme/{filename}"
            path.write_text(text, encoding="utf-8")
        shutil.copyfile(blob, root / BLOB_NAME)
        return cls(root)

    def set_prefix(self, prefix: str) -> None:
        """Change SHIM_SYMBOL_PREFIX in the consumer's own prefix file (nothing else)."""
        path = self.root / "shim_symbol_prefix.bzl"
        pattern = r'(?m)^SHIM_SYMBOL_PREFIX = "[^"]*"'
        text, count = re.subn(pattern, f'SHIM_SYMBOL_PREFIX = "{prefix}"', path.read_text())
        assert count == 1, f"no SHIM_SYMBOL_PREFIX assignment in {path}"
        path.write_text(text)


# -- the Bazels -----------------------------------------------------------------------


_TEST_RESULT = re.compile(r"^(\S*//\S+)\s+.*?\b(PASSED|FAILED|TIMEOUT|NO STATUS)\b")


@dataclass
class BazelRun:
    """One finished Bazel command."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def results(self) -> dict[str, str]:
        """Test label -> PASSED/FAILED/... from `bazel test`'s summary (main repo: '//:x')."""
        found = {}
        for line in (self.stdout + "\n" + self.stderr).splitlines():
            match = _TEST_RESULT.match(line)
            if match:
                found[normalize_label(match.group(1))] = match.group(2)
        return found

    def failure(self) -> str:
        return f"{' '.join(self.argv)} exited {self.returncode}:\n{self.stderr[-4000:]}"


class Bazel:
    """A Bazel that builds consumers: `root` is where its filesystem starts on the host."""

    name = ""
    mode = ""  # "workspace" or "bzlmod"
    root = Path("/")

    def inside(self, host_path: Path) -> str:
        """`host_path` as Bazel sees it."""
        return "/" + str(host_path.resolve().relative_to(self.root.resolve()))

    def host(self, path: str) -> Path:
        """A path Bazel printed, on the host."""
        return self.root / path.lstrip("/")

    def argv(self, cwd: Path, args: Sequence[str], env: dict[str, str]) -> list[str]:
        raise NotImplementedError

    def offline_flags(self, stubs: Path) -> list[str]:
        raise NotImplementedError

    def run(
        self,
        cwd: Path,
        output_base: Path,
        command: str,
        args: Sequence[str] = (),
        stubs: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 900,
    ) -> BazelRun:
        startup = [f"--output_base={self.inside(output_base)}", "--max_idle_secs=120"]
        flags = []
        if command != "shutdown":
            # No bazel-* links in the consumer: a later `//...` would walk into them.
            flags.append("--symlink_prefix=/")
            if stubs is not None:
                flags += self.offline_flags(stubs)
        argv = self.argv(cwd, ["bazel", *startup, command, *flags, *args], env or {})
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        seconds = time.monotonic() - start
        return BazelRun(argv, proc.returncode, proc.stdout, proc.stderr, seconds)


class HostBazel(Bazel):
    """Debian's Bazel 4.2.3 on this machine: WORKSPACE mode."""

    name = "bazel-4.2.3-workspace"
    mode = "workspace"

    def argv(self, cwd: Path, args: Sequence[str], env: dict[str, str]) -> list[str]:
        python = env.get("SHIMKIT_PYTHON", str(VENV_PYTHON))
        assignments = [f"SHIMKIT_PYTHON={python}"]
        return ["env", "-C", str(cwd), *assignments, *args]

    def offline_flags(self, stubs: Path) -> list[str]:
        overrides = {
            **DEBIAN_REPOSITORIES,
            "rules_cc": str(stubs / "rules_cc_stub"),
            "remote_coverage_tools": str(stubs / "remote_coverage_tools_stub"),
        }
        return [f"--override_repository={k}={v}" for k, v in sorted(overrides.items())]


class ChrootBazel(Bazel):
    """Debian sid's Bazel 7 in tools/bazel7_chroot.sh's chroot: bzlmod."""

    name = "bazel-7-bzlmod"
    mode = "bzlmod"
    root = CHROOT
    python = "/opt/shimkit-venv/bin/python"  # made by the script's setup

    def argv(self, cwd: Path, args: Sequence[str], env: dict[str, str]) -> list[str]:
        python = env.get("SHIMKIT_PYTHON", self.python)
        return [
            str(CHROOT_SCRIPT),
            "run",
            "--cwd",
            self.inside(cwd),
            "env",
            f"SHIMKIT_PYTHON={python}",
            *args,
        ]

    def offline_flags(self, stubs: Path) -> list[str]:
        inside = self.inside(stubs / "bzlmod_stubs")
        return [f"--override_module={m}={inside}/{m}" for m in BZLMOD_STUB_MODULES]


def copy_stubs(parent: Path) -> Path:
    """shimkit's offline stubs, copied next to the consumers (the chroot cannot see ROOT)."""
    stubs = parent / "offline-stubs"
    for name in STUBS:
        shutil.copytree(ROOT / "third_party" / name, stubs / name)
    return stubs


def remove_tree(path: Path) -> None:
    """rm -rf, also through the read-only directories of Bazel output bases."""

    def make_writable(func: object, name: str, _exc: object) -> None:
        os.chmod(os.path.dirname(name), 0o755)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, 0o755)
            shutil.rmtree(name, onerror=make_writable)
        else:
            os.unlink(name)

    if path.exists():
        shutil.rmtree(path, onerror=make_writable)


# -- what a build did -----------------------------------------------------------------


@dataclass(frozen=True)
class Spawn:
    """One executed (or cache-served) action from Bazel's execution log."""

    mnemonic: str
    command: tuple[str, ...]
    outputs: tuple[str, ...]
    cache_hit: bool
    runner: str

    @property
    def is_test_run(self) -> bool:
        """The spawn that runs a test (Bazel's test-setup.sh wrapping the test executable)."""
        return bool(self.command) and self.command[0].endswith("/test-setup.sh")

    @property
    def is_test_xml_generation(self) -> bool:
        """Bazel's own follow-up of a test without an XML report: generate-xml.sh turns
        test.log into test.xml, with the test's measured duration as an argument, so its key
        changes from run to run (a cache-served test reports 0 s). Not a shimkit action."""
        return bool(self.command) and self.command[0].endswith("/generate-xml.sh")

    def describe(self) -> str:
        first = self.outputs[0] if self.outputs else "?"
        return f"{self.mnemonic} {first} ({self.runner})"


def execution_log(path: Path) -> list[Spawn]:
    """The spawns of `--execution_log_json_file` (a stream of JSON objects, Bazel 4 and 7)."""
    text = path.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    spawns, index = [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return spawns
        entry, index = decoder.raw_decode(text, index)
        listed = entry.get("actualOutputs") or entry.get("listedOutputs") or []
        # Bazel 4 lists output paths as strings, Bazel 7 as {"path": ...} objects.
        outputs = tuple(o if isinstance(o, str) else o.get("path", "") for o in listed)
        spawns.append(
            Spawn(
                mnemonic=entry.get("mnemonic", ""),
                command=tuple(entry.get("commandArgs") or ()),
                outputs=outputs,
                # Bazel 4: remoteCacheHit; Bazel 7.1+ renamed it cacheHit.
                cache_hit=bool(entry.get("cacheHit", entry.get("remoteCacheHit", False))),
                runner=entry.get("runner", ""),
            )
        )


def runs_of_test(spawns: Sequence[Spawn], test: str) -> list[Spawn]:
    """The spawns that ran the main-repository test `test` (by its testlogs folder)."""
    folder = f"testlogs/{test}/"
    return [s for s in spawns if s.is_test_run and any(folder in o for o in s.outputs)]


def exported_shims(library: Path, families: Sequence[str]) -> set[str]:
    """Defined dynamic symbols of `library` that contain a shim family name."""
    return {s for s in defined_dynamic_symbols(library) if any(f in s for f in families)}
