"""Files the user keeps are replaced whole or not at all: kills, races, read-only
directories, symlinks and modes."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from shimkit.fileio import STAGING_MARKER, staged_output, write_atomically

from tests.faults.conftest import (
    NOBODY,
    SHIMKIT,
    Cli,
    assert_one_line_error,
    can_drop_privileges,
    clean_env,
)

KILL_ROUNDS = 20


def _gate_inputs(tmp_path: Path, elf_fixtures: dict[str, Path]) -> Path:
    inputs = tmp_path / "out"
    inputs.mkdir()
    for name in ("shim_prefixed.so", "blob_prefixed.so", "blob_unprefixed.so"):
        shutil.copyfile(elf_fixtures[name], inputs / name)
    return inputs


def _kill_before(function: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child that SIGKILLs itself the moment it calls `function` (a
    dotted name in os / pathlib): the worst moment, deterministically."""
    module, _, name = function.rpartition(".")
    code = (
        "import os, signal, sys, pathlib\n"
        f"import {module} as target\n"
        f"def killer(*a, **k): os.kill(os.getpid(), signal.SIGKILL)\n"
        f"setattr(target, {name!r}, killer)\n"
        "from shimkit.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=clean_env(), capture_output=True, text=True
    )


def test_gate_update_killed_before_the_rename_keeps_the_old_baseline(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    inputs = _gate_inputs(tmp_path, elf_fixtures)
    baseline = tmp_path / "baseline.json"
    assert cli(["gate", "--no-reference", "--baseline", str(baseline), "--update", str(inputs)],
               cwd=tmp_path).returncode == 0  # fmt: skip
    before = baseline.read_bytes()
    shutil.copyfile(elf_fixtures["shim_unprefixed.so"], inputs / "new.so")  # the update differs
    argv = ["gate", "--no-reference", "--baseline", str(baseline), "--update", str(inputs)]
    proc = _kill_before("os.replace", argv, tmp_path)
    assert proc.returncode == -signal.SIGKILL
    assert baseline.read_bytes() == before
    leftovers = [p.name for p in tmp_path.iterdir() if STAGING_MARKER in p.name]
    assert len(leftovers) == 1  # SIGKILL runs no cleanup: the temp file is all that is left
    # ...and the next update sweeps it (its owner is dead) and writes the new baseline.
    assert cli(argv, cwd=tmp_path).returncode == 0
    assert [p for p in tmp_path.iterdir() if STAGING_MARKER in p.name] == []
    assert "new.so" in baseline.read_text()


def test_negative_control_truncate_then_write_loses_the_baseline(tmp_path: Path) -> None:
    """The old writer (Path.write_text) killed between its truncation and its write."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text('{"schema": "shimkit.baseline/v1"}')
    code = (  # what write_text does: open (truncates), then write; killed in between
        "import os, signal\n"
        f"handle = open({str(baseline)!r}, 'w', encoding='utf-8')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert baseline.read_bytes() == b""  # the baseline is gone


@pytest.mark.slow
def test_gate_update_killed_at_random_moments_never_leaves_a_broken_baseline(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    inputs = _gate_inputs(tmp_path, elf_fixtures)
    baseline = tmp_path / "baseline.json"
    argv = ["gate", "--no-reference", "--baseline", str(baseline), "--update", str(inputs)]
    assert cli(argv, cwd=tmp_path).returncode == 0
    rng = random.Random(13)
    killed = 0
    for _ in range(KILL_ROUNDS):
        proc = subprocess.Popen([str(SHIMKIT), *argv], cwd=tmp_path, env=clean_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.05, 0.6))
        proc.kill()
        killed += proc.wait() == -signal.SIGKILL
        document = json.loads(baseline.read_text())  # always whole, always valid
        assert document["schema"] == "shimkit.baseline/v1"
    assert killed > 0


def test_readers_never_see_a_half_written_file(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    documents = [json.dumps({"n": n, "pad": "x" * (50_000 + n)}) for n in range(200)]
    write_atomically(target, documents[0])
    stop = threading.Event()
    bad: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            text = target.read_text()
            reads += 1
            try:
                json.loads(text)
            except ValueError:
                bad.append(text[:40])

    thread = threading.Thread(target=reader)
    thread.start()
    for document in documents:
        write_atomically(target, document)
    stop.set()
    thread.join()
    assert reads > 0 and bad == []


def _pt2_copy(elf_fixtures: dict[str, Path], tmp_path: Path, mode: int) -> Path:
    pt2 = tmp_path / "model.pt2"
    shutil.copyfile(elf_fixtures["model.pt2"], pt2)
    pt2.chmod(mode)
    return pt2


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600])
def test_rewrite_in_place_keeps_the_mode(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path], mode: int
) -> None:
    pt2 = _pt2_copy(elf_fixtures, tmp_path, mode)
    proc = cli(["rewrite", "--in-place", str(pt2)])
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(pt2.stat().st_mode) == mode


def test_rewrite_in_place_writes_through_a_symlink(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    real = _pt2_copy(elf_fixtures, tmp_path, 0o640)
    link = tmp_path / "link.pt2"
    link.symlink_to(real.name)
    before = real.read_bytes()
    proc = cli(["rewrite", "--in-place", str(link)])
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_bytes() != before  # the target was rewritten...
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # ...keeping its mode


def test_negative_control_a_new_output_gets_the_umask_mode(tmp_path: Path) -> None:
    out = tmp_path / "fresh.bin"
    old = os.umask(0o027)
    try:
        with staged_output(out) as temp:
            temp.write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_killed_in_place_rewrite_leaves_the_original_and_a_skipped_leftover(
    cli: Cli, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    pt2 = _pt2_copy(elf_fixtures, tmp_path, 0o644)
    before = pt2.read_bytes()
    proc = _kill_before("os.replace", ["rewrite", "--in-place", str(pt2)], tmp_path)
    assert proc.returncode == -signal.SIGKILL
    assert pt2.read_bytes() == before
    staging = [p for p in tmp_path.iterdir() if STAGING_MARKER in p.name]
    assert len(staging) == 1 and staging[0].is_dir()
    assert zipfile.is_zipfile(staging[0] / pt2.name)  # a whole package sat ready there
    # Walks skip it and say so; the gate over the folder is not derailed by it.
    lint = cli(["lint", "--no-reference", str(tmp_path)])
    assert "skipped" in lint.stdout and staging[0].name in lint.stdout
    assert str(staging[0]) not in [ln.split()[0] for ln in lint.stdout.splitlines() if ln]
    gate = cli(["gate", "--no-reference", "--baseline", str(tmp_path / "b.json"), "--update",
                str(tmp_path)], cwd=tmp_path)  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "skipped" in gate.stdout
    # Negative control: named explicitly, the leftover's package is read like any input.
    explicit = cli(["lint", "--no-reference", "--format", "json", str(staging[0] / pt2.name)])
    report = json.loads(explicit.stdout)
    assert report["skipped"] == [] and len(report["artifacts"]) == 1
    # The next write beside the same file sweeps it (its owner is dead).
    assert cli(["rewrite", "--in-place", str(pt2)]).returncode == 0
    assert [p for p in tmp_path.iterdir() if STAGING_MARKER in p.name] == []


def _readonly_runner(cli: Cli):  # type: ignore[no-untyped-def]
    """How to run the CLI so that permission bits apply (root ignores them)."""
    if os.geteuid() != 0:
        return lambda args, **kw: cli(args, **kw)
    if not can_drop_privileges():
        pytest.skip("running as root without setpriv: permission bits cannot be tested")
    return lambda args, **kw: cli(args, user=NOBODY, **kw)


@pytest.mark.parametrize(
    "command",
    [
        ["rewrite", "--in-place", "{pt2}"],
        ["rewrite", "-o", "{ro}/out.pt2", "{pt2}"],
        ["lint", "--no-reference", "--output", "{ro}/report.txt", "{pt2}"],
        ["gate", "--no-reference", "--baseline", "{ro}/b.json", "--update", "{pt2}"],
        ["compile", "-o", "{ro}/m.pt2", "{model}"],
    ],
    ids=["rewrite-in-place", "rewrite-o", "lint-output", "gate-update", "compile-o"],
)
def test_unwritable_output_directories_give_one_line(
    cli: Cli, world_dir: Path, elf_fixtures: dict[str, Path], command: list[str], repo_root: Path
) -> None:
    run = _readonly_runner(cli)
    ro = world_dir / "ro"
    ro.mkdir()
    pt2 = ro / "model.pt2"
    shutil.copyfile(elf_fixtures["model.pt2"], pt2)
    pt2.chmod(0o644)
    model = world_dir / "mlp.py"
    shutil.copyfile(repo_root / "examples" / "models" / "mlp.py", model)
    model.chmod(0o644)
    ro.chmod(0o555)
    args = [a.format(ro=ro, pt2=pt2, model=model) for a in command]
    cache = world_dir / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    home = {"HOME": str(world_dir), "SHIMKIT_CACHE_DIR": str(cache)}
    proc = run(args, cwd=world_dir, env=clean_env(**home))
    assert_one_line_error(proc, str(ro))
    assert sorted(p.name for p in ro.iterdir()) == ["model.pt2"]  # nothing left behind
    # Negative control: the same command into a writable directory does not fail that way
    # (as this user: torch's compiler cannot run as nobody from a venv under /root).
    ro.chmod(0o777)
    ok = cli(args, cwd=world_dir, env=clean_env(**home), timeout=300)
    assert "permission denied" not in ok.stderr.lower(), ok.stderr
