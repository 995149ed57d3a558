"""examples/consumer, a separate workspace, uses shimkit's macros from outside
(`local_repository`) and its shim library exports only prefixed names.

Built with Debian's Bazel 4.2.3 in the consumer's own workspace (its own output
base, so no lock fight with the main workspace). Negative control: the same
sources built with shimkit_cxx_library (no prefix define) export the public
names, and the same check rejects them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bazel_testlib import PREFIX_FILE, ROOT, defined_dynamic_symbols, run_bazel
from shimkit.config import ShimConfig, load_config

CONSUMER = ROOT / "examples" / "consumer"
SHIMS = {"aoti_torch_device_type_cuda", "aoti_torch_layout_strided", "aoti_torch_dtype_bfloat16"}
# Keep idle consumer servers from piling up on small CI machines.
STARTUP = ["--max_idle_secs=300"]
BUILD_FLAGS = ["--symlink_prefix=/"]  # no bazel-* links inside the source tree


def export_problems(symbols: set[str], config: ShimConfig, expected: set[str]) -> list[str]:
    """One line per shim not exported under its prefixed name or exported unprefixed."""
    problems = [f"missing {config.prefixed(n)}" for n in sorted(expected)]
    problems = [p for p in problems if p.split()[1] not in symbols]
    problems += [f"unprefixed export {n}" for n in sorted(symbols) if config.is_family(n)]
    return problems


@pytest.fixture(scope="module")
def bazel_bin() -> Path:
    run_bazel(["test", *BUILD_FLAGS, "//..."], cwd=CONSUMER, startup=STARTUP, timeout=240)
    info = run_bazel(["info", *BUILD_FLAGS, "bazel-bin"], cwd=CONSUMER, startup=STARTUP)
    return Path(info.stdout.strip())


@pytest.mark.slow
def test_consumer_shims_are_prefixed(bazel_bin: Path) -> None:
    config = load_config(PREFIX_FILE)
    symbols = defined_dynamic_symbols(bazel_bin / "libconsumer_shims.so")
    assert export_problems(symbols, config, SHIMS) == []


@pytest.mark.slow
def test_negative_control_unprefixed_build_fails_the_check(bazel_bin: Path) -> None:
    config = load_config(PREFIX_FILE)
    symbols = defined_dynamic_symbols(bazel_bin / "libconsumer_unprefixed.so")
    problems = export_problems(symbols, config, SHIMS)
    assert sorted(problems) == sorted(
        [f"missing {config.prefixed(n)}" for n in SHIMS] + [f"unprefixed export {n}" for n in SHIMS]
    )
