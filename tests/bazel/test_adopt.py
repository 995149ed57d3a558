"""acme, a consumer that is not shimkit, adopts shimkit's release archive from outside the checkout.

For each Bazel path, examples/acme is copied into a temporary directory outside the
checkout and built from the archive `make dist` makes (tools/dist.py, of the working tree):
- Debian's Bazel 4.2.3, WORKSPACE: `http_archive(urls = ["file://..."], sha256 = ...)` and
  `shimkit_config(prefix_file = "//:shim_symbol_prefix.bzl")`;
- Debian sid's Bazel 7 in tools/bazel7_chroot.sh's chroot, bzlmod: `archive_override(urls =
  ["file://..."], integrity = ...)` and `shimkit.config(prefix_file = ...)`; this path also
  builds and tests the targets of .bcr/presubmit.yml.
acme's blob is its model compiled for acme's prefix with `shimkit --config ... compile` (cached
under build/adopt-blobs/), handed to Bazel as a source file, as acme's CI would.

Each path proves:
1. `bazel test //...` passes: acme's shim test, and `shimkit_lint_test` on the built library
   and on the blob with shimkit's slim shims (built for acme's prefix) as provider.
2. The built libraries export acme's prefixed shims (acme_aoti_torch_*), nothing unprefixed.
3. Negative control: acme changes its prefix file (acme2_) but not its blob: the blob's lint
   test fails with exit bit 8, while the rebuilt library follows the new prefix (and the
   export check of 2. rejects it for acme_).
4. Hermetic actions: the same build from a second copy of acme, with the lint interpreter
   under another path, in a fresh output base sharing only the `--disk_cache`, executes
   nothing: every action (compiles, links, the lint and C++ test actions, and on the
   WORKSPACE path the generate steps of shimkit's CUDA shim library) is a cache hit in the
   execution log. Negative control: the same build with the copy's absolute path in the
   tests' environment (`--test_env`, non-hermetic on purpose) misses for exactly the test
   actions while everything else still hits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from adopt_lib import (
    ACME,
    CHROOT,
    CHROOT_SCRIPT,
    VENV_PYTHON,
    Bazel,
    BazelRun,
    ChrootBazel,
    Consumer,
    HostBazel,
    Release,
    Spawn,
    acme_blob,
    copy_stubs,
    execution_log,
    exported_shims,
    remove_tree,
    runs_of_test,
    tool_module,
)
from bazel_testlib import ROOT
from shimkit.config import ShimConfig, load_config

ACME_SHIMS = ("aoti_torch_device_type_cpu", "aoti_torch_layout_strided", "aoti_torch_dtype_float32")
LINT_TESTS = ("acme_shims_lint_test", "tiny_mlp_lint_test")
CONTROL_PREFIX = "acme2_"
PRESUBMIT = ROOT / ".bcr" / "presubmit.yml"
TIMINGS = ROOT / "build" / "adopt-timings"
# Built on the WORKSPACE path too: its two generate steps (genrules: a copied source, and the
# version script made from the consumer's prefix) must follow acme's prefix and cache like
# the rest.
CUDA_SHIMS = "@shimkit//shims/cuda:libshimkit_cuda_shims.so"


def presubmit_targets() -> tuple[list[str], list[str]]:
    """build_targets and test_targets of .bcr/presubmit.yml (its one task; no YAML library)."""
    lists: dict[str, list[str]] = {"build_targets": [], "test_targets": []}
    current = None
    for line in PRESUBMIT.read_text(encoding="utf-8").splitlines():
        key = line.strip().rstrip(":")
        if key in lists:
            current = lists[key]
        elif current is not None and line.strip().startswith("- "):
            current.append(line.strip()[2:].strip().strip('"'))
        elif line.strip():
            current = None
    return lists["build_targets"], lists["test_targets"]


@dataclass
class Proof:
    """Everything one Bazel path did, run once per module (the builds are the slow part)."""

    bazel: Bazel
    build: BazelRun
    libraries: dict[str, Path]  # name -> copy of the built library (acme_ build)
    hermetic: list[Spawn]  # execution log of the second build, elsewhere
    probed: list[Spawn]  # execution log of the negative control
    control: BazelRun
    control_libraries: dict[str, Path] = field(default_factory=dict)


def record_timings(bazel: Bazel, runs: dict[str, BazelRun]) -> None:
    """Wall time of each Bazel command, for docs/benchmarks.md (build/adopt-timings/)."""
    TIMINGS.mkdir(parents=True, exist_ok=True)
    seconds = {name: round(run.seconds, 1) for name, run in runs.items()}
    (TIMINGS / f"{bazel.name}.json").write_text(json.dumps(seconds, indent=2) + "\n")


def copy_libraries(bazel: Bazel, bin_dir: Path, dest: Path) -> dict[str, Path]:
    """The acme library and the slim shims built for acme, copied out of bazel-bin."""
    found = {"libacme_shims.so": bin_dir / "libacme_shims.so"}
    for name in ("shims/libshimkit_shims.so", "shims/cuda/libshimkit_cuda_shims.so"):
        built = sorted(bin_dir.glob(f"external/shimkit*/{name}"))
        assert len(built) <= 1, f"{bazel.name}: more than one {name}: {built}"
        if built:
            found[Path(name).name] = built[0]
    dest.mkdir(parents=True)
    copies = {}
    for name, path in found.items():
        copies[name] = dest / name
        shutil.copyfile(path, copies[name])
    return copies


def bin_dir(bazel: Bazel, consumer: Consumer, output_base: Path, stubs: Path) -> Path:
    info = bazel.run(consumer.root, output_base, "info", ["bazel-bin"], stubs=stubs)
    assert info.returncode == 0, info.failure()
    return bazel.host(info.stdout.strip())


def run_proof(bazel: Bazel, base: Path, blob: Path) -> Proof:
    dist = tool_module("dist")
    archive = dist.build_archive(base / "dist", dist.worktree_commit())
    release = Release(archive.path, archive.version, archive.sha256, archive.integrity)
    url = "file://" + bazel.inside(release.archive)
    stubs = copy_stubs(base)
    first = Consumer.create(base, "acme", release, url, blob)
    second = Consumer.create(base, "acme-second-copy", release, url, blob)
    cache = base / "disk-cache"
    targets = ["//..."]
    if bazel.mode == "bzlmod":
        build_targets, test_targets = presubmit_targets()
        targets += build_targets + test_targets
    else:
        targets.append(CUDA_SHIMS)

    def logged_test(
        consumer: Consumer,
        name: str,
        env: dict[str, str] | None = None,
        extra: tuple[str, ...] | list[str] = (),
    ) -> BazelRun:
        args = [
            f"--disk_cache={bazel.inside(cache)}",
            f"--execution_log_json_file={bazel.inside(base / f'{name}.log.json')}",
            *extra,
            *targets,
        ]
        return bazel.run(consumer.root, base / f"ob-{name}", "test", args, stubs=stubs, env=env)

    try:
        build = logged_test(first, "first")
        assert build.returncode == 0, build.failure()
        libraries = copy_libraries(
            bazel, bin_dir(bazel, first, base / "ob-first", stubs), base / "libs-first"
        )
        # Elsewhere: another copy of acme, and the same interpreter under another path (a
        # link to its venv), in a fresh output base sharing only the disk cache.
        python = Path(ChrootBazel.python if bazel.mode == "bzlmod" else VENV_PYTHON)
        (base / "venv-elsewhere").symlink_to(python.parent.parent)
        moved_python = f"{bazel.inside(base)}/venv-elsewhere/bin/{python.name}"
        again = logged_test(second, "second", env={"SHIMKIT_PYTHON": moved_python})
        assert again.returncode == 0, again.failure()
        # Negative control: test actions made non-hermetic on purpose, with the copy's
        # absolute path in their environment.
        where = f"--test_env=ACME_COPY={bazel.inside(second.root)}"
        probe = logged_test(second, "probe", extra=[where])
        assert probe.returncode == 0, probe.failure()

        first.set_prefix(CONTROL_PREFIX)
        control = bazel.run(
            first.root,
            base / "ob-first",
            "test",
            ["--keep_going", "//:libacme_shims.so", *(f"//:{t}" for t in LINT_TESTS)],
            stubs=stubs,
        )
        control_libraries = copy_libraries(
            bazel, bin_dir(bazel, first, base / "ob-first", stubs), base / "libs-control"
        )
        record_timings(
            bazel,
            {"first build": build, "second build": again, "probe": probe, "control": control},
        )
        return Proof(
            bazel,
            build,
            libraries,
            execution_log(base / "second.log.json"),
            execution_log(base / "probe.log.json"),
            control,
            control_libraries,
        )
    finally:
        for name in ("first", "second", "probe"):
            if (base / f"ob-{name}").is_dir():
                bazel.run(first.root, base / f"ob-{name}", "shutdown", timeout=120)


def chroot_ready() -> None:
    """tools/bazel7_chroot.sh setup: makes the chroot the first time, ~1 s afterwards."""
    argv = [str(CHROOT_SCRIPT), "setup"]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="module")
def blob() -> Path:
    return acme_blob()


@pytest.fixture(scope="module", params=[HostBazel, ChrootBazel], ids=lambda c: c.name)
def proof(request: pytest.FixtureRequest, blob: Path) -> Iterator[Proof]:
    bazel: Bazel = request.param()
    if isinstance(bazel, ChrootBazel):
        chroot_ready()
        parent = CHROOT / "tmp"
    else:
        parent = Path(tempfile.gettempdir())
    base = Path(tempfile.mkdtemp(prefix="shimkit-adopt-", dir=parent))
    try:
        # Outside the checkout as Bazel sees it (the chroot does not even contain the checkout).
        assert ROOT.resolve() not in Path(bazel.inside(base)).parents, base
        yield run_proof(bazel, base, blob)
    finally:
        remove_tree(base)


@pytest.fixture(scope="module")
def acme_config() -> ShimConfig:
    return load_config(ACME / "shim_symbol_prefix.bzl")


def export_problems(symbols: set[str], config: ShimConfig, expected: tuple[str, ...]) -> list[str]:
    """One line per expected shim not exported with `config`'s prefix, or exported unprefixed."""
    problems = [f"missing {p}" for p in map(config.prefixed, expected) if p not in symbols]
    problems += [f"unprefixed export {n}" for n in sorted(symbols) if config.is_family(n)]
    problems += [
        f"foreign export {n}"
        for n in sorted(symbols)
        if not n.startswith(config.prefix) and not config.is_family(n)
    ]
    return problems


# -- 1. build and lint ----------------------------------------------------------------


@pytest.mark.slow
def test_consumer_builds_and_lints_from_the_release_archive(proof: Proof) -> None:
    results = proof.build.results()
    for test in ("acme_shims_test", *LINT_TESTS):
        assert results.get(f"//:{test}") == "PASSED", (test, results)


@pytest.mark.slow
def test_presubmit_targets_build_and_pass_under_bzlmod(proof: Proof) -> None:
    if proof.bazel.mode != "bzlmod":
        pytest.skip(".bcr/presubmit.yml is for the Bazel Central Registry (bzlmod)")
    build_targets, test_targets = presubmit_targets()
    assert build_targets and test_targets
    results = proof.build.results()
    shimkit_tests = {label: r for label, r in results.items() if "//tests/bazel:" in label}
    assert len(shimkit_tests) >= 10, results
    assert set(shimkit_tests.values()) == {"PASSED"}, shimkit_tests


# -- 2. exports -----------------------------------------------------------------------


@pytest.mark.slow
def test_built_libraries_export_acme_prefixed_shims(proof: Proof, acme_config: ShimConfig) -> None:
    families = acme_config.families
    acme = exported_shims(proof.libraries["libacme_shims.so"], families)
    assert export_problems(acme, acme_config, ACME_SHIMS) == []
    assert acme == {acme_config.prefixed(n) for n in ACME_SHIMS}
    slim = exported_shims(proof.libraries["libshimkit_shims.so"], families)
    assert export_problems(slim, acme_config, ("aoti_torch_empty_strided",)) == []
    assert len(slim) >= 20, sorted(slim)
    if proof.bazel.mode == "workspace":  # its version script is generated from acme's prefix
        cuda = exported_shims(proof.libraries["libshimkit_cuda_shims.so"], families)
        assert export_problems(cuda, acme_config, ("aoti_torch_cuda_mm_out",)) == []
        assert len(cuda) > len(slim), sorted(cuda)


# -- 3. negative control: the consumer's prefix changes, its blob does not --------------


@pytest.mark.slow
def test_control_new_prefix_old_blob_fails_lint_with_bit_8(
    proof: Proof, acme_config: ShimConfig
) -> None:
    results = proof.control.results()
    # The built library follows the prefix file: it is rebuilt and lints clean...
    assert results.get("//:acme_shims_lint_test") == "PASSED", results
    moved = exported_shims(proof.control_libraries["libacme_shims.so"], acme_config.families)
    assert moved == {CONTROL_PREFIX + n for n in ACME_SHIMS}
    # ...and the export check of test 2 rejects it for acme_ (that check's negative control).
    assert sorted(export_problems(moved, acme_config, ACME_SHIMS)) == sorted(
        [f"missing {acme_config.prefixed(n)}" for n in ACME_SHIMS]
        + [f"foreign export {CONTROL_PREFIX}{n}" for n in ACME_SHIMS]
    )
    # ...while the blob compiled for acme_ is now a shim under another prefix: SK001, bit 8.
    assert results.get("//:tiny_mlp_lint_test") == "FAILED", results
    output = proof.control.stdout + proof.control.stderr
    assert "shimkit exited 8, expected 0" in output, output[-3000:]


# -- 4. hermetic actions --------------------------------------------------------------


def _lint_runs(spawns: list[Spawn]) -> list[Spawn]:
    return [s for test in LINT_TESTS for s in runs_of_test(spawns, test)]


@pytest.mark.slow
def test_second_build_elsewhere_is_all_cache_hits(proof: Proof) -> None:
    spawns = proof.hermetic
    # Bazel's generate-xml.sh step has the test's measured duration in its command line,
    # so it never hits; every other action must (see Spawn.is_test_xml_generation).
    executed = [s.describe() for s in spawns if not s.cache_hit and not s.is_test_xml_generation]
    assert executed == [], executed
    mnemonics = {s.mnemonic for s in spawns if s.cache_hit}
    assert {"CppCompile", "CppLink", "TestRunner"} <= mnemonics, mnemonics
    assert len(_lint_runs(spawns)) == len(LINT_TESTS), [s.describe() for s in spawns]
    slim_compiles = [s for s in spawns if s.mnemonic == "CppCompile" and "/shims/" in s.outputs[0]]
    assert slim_compiles, "shimkit's own compiles must be among the cached actions"
    if proof.bazel.mode == "workspace":
        genrules = [s for s in spawns if s.mnemonic == "Genrule"]
        generated = {o.rsplit("/", 1)[-1] for s in genrules for o in s.outputs}
        assert "cuda_shims.lds" in generated, generated


@pytest.mark.slow
def test_control_non_hermetic_tests_miss_the_cache(proof: Proof) -> None:
    """With an absolute path in the test environment, exactly the test actions miss."""
    spawns = proof.probed
    runs = [s for s in spawns if s.is_test_run]
    assert {t for t in LINT_TESTS} <= {o.split("/")[-2] for s in runs for o in s.outputs}
    assert runs and not any(s.cache_hit for s in runs), [s.describe() for s in runs]
    others = [s for s in spawns if not s.is_test_run and not s.is_test_xml_generation]
    assert others and all(s.cache_hit for s in others), [s.describe() for s in others]
