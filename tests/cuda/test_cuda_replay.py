"""The runner's CUDA-graph replay mode, in CI, with fake blobs and the fake CUDA libraries.

The fake runtime records what is issued to a stream under capture (copies, host functions,
and the fake cuBLAS, cuBLASLt and cuDNN's work) and runs it again at each launch. So CI
checks the state machine (eager warm-up, capture, replays), one graph launch per replayed
run, replays on new inputs (device GEMMs and host fallbacks), eager runs for inputs of
another geometry and when capture is refused (with the reason in the status), and that
freeing the model leaves no graph or stream behind. The device kernels' own numerics in
replay are checked on a GPU (tools/gpu, step `slim_graphs`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cuda.conftest import fake_env

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def replay(
    cuda_libs: dict[str, Path],
    fakes: dict[str, Path],
    fake_blob: Path,
    command: str = "replay",
    **env: str,
) -> dict[str, Any]:
    child_env = dict(os.environ)
    child_env.update(fake_env(fakes), PYTHONPATH=str(ROOT / "lint"), **env)
    done = subprocess.run(
        [sys.executable, str(HERE / "runner_child.py"), str(cuda_libs["runner"]), command,
         str(fake_blob)],
        capture_output=True, text=True, env=child_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_replay_warms_up_captures_and_replays(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    r = replay(cuda_libs, fakes, fake_blob)
    assert r["status_before"] == "cold"
    assert r["statuses"] == ["warmed up", "replaying", "replaying", "replaying"]
    assert all(r["x_ok"])
    assert r["launches_after_x"] == 3  # runs 2 (captured), 3 and 4: one launch each
    # New inputs replay: the launch computes the product of y, not the capture's x.
    assert r["y_ok"] and r["y_launched"] == 1
    # Another geometry runs eagerly (correct, no launch); the graph stays.
    assert r["z_ok"] and r["z_launched"] == 0 and r["status_after"] == "replaying"
    assert r["live_execs"] == 0 and r["live_streams"] == 0  # freed with the model


def test_replay_of_a_device_gemm_fails_when_the_fakes_do_not_record_it(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    # Negative control for y_ok above: a cuBLASLt that ran its work at the call (as the
    # fakes once did) leaves the graph's launch with the capture's product.
    r = replay(cuda_libs, fakes, fake_blob, FAKE_CUDA_WORK_AT_CALL="1")
    assert r["statuses"][-1] == "replaying" and r["y_launched"] == 1
    assert not r["y_ok"]


def test_refused_capture_leaves_the_model_eager_with_the_reason(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    # Control for the above: with capture refused nothing is launched and every run is
    # eager, so new inputs (y) give new, correct results.
    r = replay(cuda_libs, fakes, fake_blob, FAKE_CUDA_NO_CAPTURE="1")
    assert r["statuses"][0] == "warmed up"
    assert (
        r["statuses"][1].startswith("eager: capture: ")
        and "cudaStreamBeginCapture" in (r["statuses"][1])
    )
    assert all(r["x_ok"]) and r["y_ok"] and r["z_ok"]
    assert r["launches_after_x"] == 0
    assert r["live_execs"] == 0 and r["live_streams"] == 0


def test_replay_runs_clean_under_asan_ubsan(
    asan_cuda_libs: dict[str, Path],
    fakes: dict[str, Path],
    fake_blob: Path,
    fake_host_blob: Path,
) -> None:
    from tests.cuda.test_cuda_fake import asan_env

    r = replay(asan_cuda_libs, fakes, fake_blob, **asan_env())
    assert r["statuses"][-1] == "replaying" and r["live_execs"] == 0  # no host step
    # Captured host steps: closures, pinned buffers and the failed replay's clean-up.
    slow_syncs = {"FAKE_CUDA_SYNC_US": "2000", **asan_env()}  # replay kept, as above
    r = replay(asan_cuda_libs, fakes, fake_host_blob, "replay_host", **slow_syncs)
    assert r["ok"] == [True] * 8 and r["live_execs"] == 0
    assert r["status_after_bad"].startswith("eager: replay: ")


def test_host_fallbacks_replay_on_new_inputs(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_host_blob: Path
) -> None:
    # topk and histc have no device kernel here: under capture each becomes a host step
    # (copies to pinned memory, the CPU op in a host function, copies back), so the model
    # replays, and every replay computes from that run's inputs.
    # Synchronisations are slow here (2 ms): eager host fallbacks pay several per run, a
    # replay one, so the runner's timing keeps replay.
    r = replay(cuda_libs, fakes, fake_host_blob, "replay_host", FAKE_CUDA_SYNC_US="2000")
    replaying = "replaying, 2 host steps (topk, histc)"  # the ops, for the user to see
    timing = f"{replaying}; timing replay against eager"
    assert r["statuses"] == ["warmed up"] + [timing] * 3 + [replaying] * 4
    assert r["ok"] == [True] * 8
    assert r["launches"] == 5 and r["replayed_work"] > 0  # runs 2, 4, 6, 7 and 8
    # A host step that fails at a replay fails that run with the op's error; the model
    # then runs eagerly, correctly, and says why.
    assert "graph replay: " in r["bad_run"]
    assert "host step of a replay failed: histc" in r["bad_run"]
    assert "range of [-2.968636, inf] is not finite" in r["bad_run"]
    assert r["status_after_bad"].startswith("eager: replay: ")
    assert r["eager_after_bad_ok"] and r["launched_after_bad"] == 0
    assert r["live_execs"] == 0


def test_host_fallbacks_cannot_replay_when_capture_is_refused(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_host_blob: Path
) -> None:
    # Control for the above: without capture every run is eager and still right, and
    # nothing is launched.
    r = replay(cuda_libs, fakes, fake_host_blob, "replay_host", FAKE_CUDA_NO_CAPTURE="1")
    assert r["statuses"][1].startswith("eager: capture: ")
    assert r["ok"] == [True] * 8
    assert r["launches"] == 0 and r["replayed_work"] == 0


def test_replay_slower_than_eager_is_given_up_with_both_times(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_host_blob: Path
) -> None:
    # Host functions of a replay start 20 ms late (a slow callback thread): the timed runs
    # find replay slower than eager, so the model runs eagerly and says why with both
    # times. The control is the test above, where replay wins and is kept.
    r = replay(cuda_libs, fakes, fake_host_blob, "replay_host", FAKE_CUDA_HOST_FN_US="20000")
    chosen = r["statuses"][4]
    assert chosen.startswith("eager: replay with 2 host step(s) (topk, histc) took "), chosen
    assert ", an eager run " in chosen and chosen.endswith(" us")
    took = float(chosen.split(" took ")[1].split(" us")[0])
    assert took >= 40000  # two host steps, 20 ms each
    assert r["statuses"][4:] == [chosen] * 4
    assert r["ok"] == [True] * 8
    assert r["launches"] == 2  # runs 2 and 4 only


def test_a_blob_without_the_single_threaded_run_is_not_captured(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_old_blob: Path
) -> None:
    # torch's AOTInductorModelContainerRun queries the event it recorded after the last
    # run; recorded under capture, that event cannot be queried (on the H200 the next eager
    # run failed "invalid argument"). The fake blob's Run does the same, so without the
    # single-threaded entry the runner does not capture, and every run stays right,
    # another geometry included. The blobs above have the entry: eager runs after their
    # capture (another geometry, the timed choice) work.
    r = replay(cuda_libs, fakes, fake_old_blob)
    assert r["statuses"][0] == "warmed up"
    assert r["statuses"][1].startswith("eager: capture: the blob has no ")
    assert "AOTInductorModelContainerRunSingleThreaded" in r["statuses"][1]
    assert all(r["x_ok"]) and r["y_ok"] and r["z_ok"]
    assert r["launches_after_x"] == 0 and r["live_execs"] == 0
