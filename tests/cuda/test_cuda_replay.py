"""The runner's CUDA-graph replay mode, in CI, with a fake blob and the fake CUDA libraries.

The fake runtime runs work when it is issued, so replays recompute nothing: CI checks
the state machine (eager warm-up, capture, replays), one graph launch per replayed run,
eager runs for inputs of another geometry and when capture is refused (with the reason
in the status), and that freeing the model leaves no graph or stream behind. Replay
numerics are checked on a GPU (tools/gpu, step `slim_graphs`).
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
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path, **env: str
) -> dict[str, Any]:
    child_env = dict(os.environ)
    child_env.update(fake_env(fakes), PYTHONPATH=str(ROOT / "lint"), **env)
    done = subprocess.run(
        [sys.executable, str(HERE / "runner_child.py"), str(cuda_libs["runner"]), "replay",
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
    # Another geometry runs eagerly (correct, no launch); the graph stays.
    assert r["z_ok"] and r["z_launched"] == 0 and r["status_after"] == "replaying"
    assert r["live_execs"] == 0 and r["live_streams"] == 0  # freed with the model


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
    asan_cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    from tests.cuda.test_cuda_fake import asan_env

    r = replay(asan_cuda_libs, fakes, fake_blob, **asan_env())
    assert r["statuses"][-1] == "replaying" and r["live_execs"] == 0
