"""The CUDA code paths of the slim shims, in CI, against a fake CUDA runtime, cuBLAS and cuDNN.

tests/cuda/fake/ implements the few CUDA runtime, cuBLAS and cuDNN functions the
shims dlopen, over host memory (plain-loop column-major SGEMM, direct
convolution), so allocation,
caching, pinned memory, copies in every direction and layout, guards,
streams, the cuBLAS layout logic and the host fallbacks run here and are
compared with numpy and with the CPU shims. Each scenario runs in a child
process (the shims read their environment once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cuda.conftest import fake_env

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def run_scenario(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], name: str, **env: str
) -> subprocess.CompletedProcess[str]:
    child_env = dict(os.environ)
    child_env.update(
        fake_env(fakes),
        FAKE_CUDA_DEVICES="2",
        PYTHONPATH=os.pathsep.join([str(ROOT / "lint"), child_env.get("PYTHONPATH", "")]),
    )
    child_env.update(env)
    return subprocess.run(
        [sys.executable, str(HERE / "fake_scenarios.py"), str(cuda_libs["shims"]), name],
        capture_output=True,
        text=True,
        env=child_env,
    )


def scenario(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], name: str, **env: str
) -> dict[str, Any]:
    done = run_scenario(cuda_libs, fakes, name, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def asan_env() -> dict[str, str]:
    libasan = subprocess.run(
        ["g++", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    libstdcxx = subprocess.run(
        ["g++", "-print-file-name=libstdc++.so.6"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {
        # libstdc++ preloaded too: ASan's __cxa_throw interceptor needs the real one at
        # start-up, and python does not link libstdc++ (the shims throw internally).
        "LD_PRELOAD": f"{libasan} {libstdcxx}",
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }


def test_tensors_copies_guards_and_streams(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "basics")
    assert r["devices"] == 2
    assert r["roundtrip"] and r["clone_values"] and r["zeroed"]
    assert "buf7 contains NaN" in r["nan_on_device"]
    assert r["colmajor_strides"] == [1, 3]
    assert r["clone_strides"] == [1, 3]  # clone keeps a dense layout's stride order
    assert r["pinned_host_allocs"] == 1  # empty_strided_pinned is cudaHostAlloc
    assert "CUDA device index 2 out of range: 2 device(s) present" in r["out_of_range"]
    assert (r["inside_guard"], r["after_guard"]) == (1, 0)
    assert (r["stream_inside"], r["stream_after"]) == (0x1234, None)


def test_caching_allocator_reuses_blocks(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    cached = scenario(cuda_libs, fakes, "caching")
    assert cached["mallocs"] == 1 and cached["cached"] == 1024
    # Negative control: with the cache off every allocation reaches cudaMalloc.
    uncached = scenario(cuda_libs, fakes, "caching", SHIMKIT_CUDA_CACHING="0")
    assert uncached["mallocs"] == 10 and uncached["cached"] == 0


def test_gemms_run_on_cublaslt_and_match_numpy(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "matmul")
    counts = r.pop("gemm_counts")
    for case, diff in r.items():
        assert diff < 1e-5, case
    # Both mms, the three addmms (the row bias, also expanded over the rows, in its
    # epilogue) and both bmms (strided batches, one of rows read with a step) on cuBLASLt,
    # none on cuBLAS or the host: the expanded bias and the rows read with a step are taken
    # in place (control: a copy through the host would count copies).
    copies = counts.pop("copies")
    assert counts == {"cublaslt": 7, "cublas": 0, "lt_matmuls": 7}
    assert copies == {"addmm_expanded_bias": 0, "bmm_strided_row": 0}


def test_legacy_cublas_layouts_match_numpy(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    for env in ({"SHIMKIT_CUBLASLT": "0"}, {"FAKE_CUBLASLT_REFUSE": "1"}):
        r = scenario(cuda_libs, fakes, "matmul", **env)
        counts = r.pop("gemm_counts")
        assert counts.pop("copies") == {"addmm_expanded_bias": 0, "bmm_strided_row": 0}, env
        for case, diff in r.items():
            assert diff < 1e-5, (env, case)
        assert (counts["cublaslt"], counts["cublas"], counts["lt_matmuls"]) == (0, 7, 0), env


def test_matmul_tf32_is_an_option_and_off_by_default(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # TF32 in float32 GEMMs on request (torch.backends.cuda.matmul.allow_tf32): the fake
    # cuBLASLt (compute type 32F_FAST_TF32) and cuBLAS (TF32 tensor-op math mode) round their
    # operands to TF32 only when asked, so results move by ~1e-3; the default runs above
    # stay within 1e-5 (test_gemms_run_on_cublaslt_and_match_numpy: the control).
    for env in ({}, {"FAKE_CUBLASLT_REFUSE": "1"}):
        r = scenario(cuda_libs, fakes, "matmul", SHIMKIT_MATMUL_TF32="1", **env)
        counts = r.pop("gemm_counts")
        assert counts["cublaslt" if not env else "cublas"] == 7, env
        for case, diff in r.items():
            assert 1e-4 < diff < 5e-2, (env, case, diff)
    # Half-precision data keeps float32 arithmetic: TF32 is for float32 data only.
    half = scenario(cuda_libs, fakes, "matmul_half", SHIMKIT_MATMUL_TF32="1")
    assert half.pop("gemm_counts") == {"cublaslt": 6, "cublas": 0}
    for op in ("mm", "addmm", "bmm"):
        assert half[f"float16_{op}"] < 1e-2 and half[f"bfloat16_{op}"] < 5e-2, op


def test_half_precision_gemms_run_on_cublaslt(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "matmul_half")
    # Results rounded to the output type: float16 keeps ~3 decimal digits, bfloat16 ~2
    # (inputs are ~N(0, 1), sums of 6-8 products).
    for op in ("mm", "addmm", "bmm"):
        assert r[f"float16_{op}"] < 1e-2, op
        assert r[f"bfloat16_{op}"] < 5e-2, op
    assert r["gemm_counts"] == {"cublaslt": 6, "cublas": 0}
    # Control: a cuBLASLt that reads bfloat16 as float16 is caught.
    wrong = scenario(cuda_libs, fakes, "matmul_half", FAKE_CUBLASLT_BF16_AS_F16="1")
    assert wrong["float16_mm"] < 1e-2 and wrong["bfloat16_mm"] > 1.0
    # Without cuBLASLt (legacy cuBLAS has no half-precision path here) the products take
    # the host fallback (copy down, the CPU shims' half-precision GEMM, copy up): right
    # answers, no GPU GEMM.
    host = scenario(cuda_libs, fakes, "matmul_half", SHIMKIT_CUBLASLT="0")
    assert host.pop("gemm_counts") == {"cublaslt": 0, "cublas": 0}
    for op in ("mm", "addmm", "bmm"):
        assert host[f"float16_{op}"] < 1e-2, op
        assert host[f"bfloat16_{op}"] < 5e-2, op


def test_layout_checks_catch_a_wrong_transpose_or_a_lost_bias(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # Negative controls: libraries that ignore the transpose flags or the bias give wrong results.
    r = scenario(cuda_libs, fakes, "matmul", SHIMKIT_CUBLASLT="0", FAKE_CUBLAS_IGNORE_TRANS="1")
    assert r["mm_wT"] > 1e-2
    r = scenario(cuda_libs, fakes, "matmul", FAKE_CUBLASLT_IGNORE_TRANS="1")
    assert r["mm_wT"] > 1e-2
    r = scenario(cuda_libs, fakes, "matmul", FAKE_CUBLASLT_IGNORE_BIAS="1")
    assert r["addmm_row_bias"] > 1e-2 and r["mm_wT"] < 1e-5


def test_cublaslt_keeps_the_fastest_algorithm(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "autotune", FAKE_CUBLASLT_TWO_ALGOS="1")
    assert r["mm_ok"] and r["addmm_ok"]
    # Timed once (a warm-up and five runs), then never again: 20 mms, 6 slow runs.
    assert r["slow_runs_mm"] == 6
    # Control: without tuning the heuristic's first (slow) choice runs every time.
    r = scenario(
        cuda_libs, fakes, "autotune", FAKE_CUBLASLT_TWO_ALGOS="1", SHIMKIT_CUBLASLT_AUTOTUNE="0"
    )
    assert r["mm_ok"] and r["slow_runs_mm"] == 20


def test_graph_capture_allocates_from_a_private_pool(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "graph_pools", FAKE_CUDA_NO_CAPTURE="0")
    assert r["common_pool_reuses"]  # control: reuse is visible
    assert not r["capture_took_common_block"] and r["capture_reuses_its_own"]
    assert not r["outside_took_graph_block"]
    assert r["launches"] == 1 and r["pool_blocks_freed"] == 1
    assert r["live_execs"] == 0 and r["live_streams"] == 0


def test_refused_capture_is_a_clear_error(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    done = run_scenario(cuda_libs, fakes, "graph_pools", FAKE_CUDA_NO_CAPTURE="1")
    assert done.returncode != 0  # the scenario's own capture is refused
    assert "cudaStreamBeginCapture" in done.stderr


def test_host_fallbacks_are_captured_as_host_steps(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "captured_host_steps")
    # The capture records copies and host functions: no synchronisation, one pinned
    # buffer per input and result (topk 1 + 2, mm 2 + out, index_reduce 3 + 1).
    assert r["capture_syncs"] == 0 and r["pinned_buffers"] == 10
    assert r["topk_geometry"] == [[4, 2], [4, 2]]  # found by one run on zeros
    assert r["host_steps"] == 3 and r["host_steps_after_free"] == 0  # nonzero's is not one
    # Their ops, in capture order (the buffer's own limit cuts them, NUL-terminated).
    assert r["host_step_names"] == "topk, mm, index_reduce"
    assert r["host_step_names_length"] == len("topk, mm, index_reduce")
    assert r["host_step_names_cut"] == "topk, m" and r["host_step_names_after_free"] == 0
    # Each replay computes from the inputs of its launch, all three ops.
    assert r["replays_ok"] == [True, True, True, True]
    # A step that fails in a replay is reported once, naming the op and why.
    assert "host step of a replay failed: index_reduce" in r["bad_index_check"]
    assert "index" in r["bad_index_check"].split("index_reduce", 1)[1]
    assert r["check_after_report"] and r["live_execs"] == 0
    assert "nonzero: the size of its result depends on the data" in r["nonzero_under_capture"]
    assert "reads a device value on the host" in r["item_under_capture"]
    assert "aoti_torch_item_int64" in r["item_under_capture"]
    assert r["eager_item"] == 5  # control: eagerly it reads the device's value
    # Controls: eagerly the same op synchronises; and the fake does refuse a
    # synchronisation under capture (so a step that synchronised could not pass above).
    assert r["eager_syncs"] >= 1
    assert not r["sync_under_capture"]
    # The fake's events: one recorded under capture fails a query ("invalid argument"),
    # as on the H200, which the runner's replay avoids (test_cuda_replay.py).
    assert r["query_captured_event"] == 1 and r["query_event_recorded_after"] == 0
    assert "cudaStreamEndCapture" in r["end_after_sync"]


def test_random_draws_are_drawn_by_each_launch_not_a_host_step(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "captured_random_draws")
    assert r["host_steps"] == 0 and r["host_fns"] == 0
    # Each launch draws anew, in the generator's order: the eager draws after the same seed.
    assert r["replays_are_the_eager_draws"] and r["distinct_replays"] == 3
    assert r["other_pool_repeats"]  # control: a launch for another pool draws nothing
    assert r["live_execs"] == 0


def test_device_work_is_captured_and_replayed_on_new_inputs(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "captured_device_work")
    # The eager warm-up is right (TF32 convolutions: within 1e-2 of float64).
    assert r["eager"] < 1e-2
    assert r["captured_matmuls"] == 2  # addmm and bmm went to cuBLASLt under capture
    # Each launch computes addmm, bmm and both convolutions from that launch's inputs.
    assert all(worst < 1e-2 for worst in r["launches"]), r["launches"]
    # Negative control: fakes that ran their work at the call, as they did before, leave
    # every launch with the capture's results, far from the new inputs' (values ~1-10).
    stale = scenario(cuda_libs, fakes, "captured_device_work", FAKE_CUDA_WORK_AT_CALL="1")
    assert stale["eager"] < 1e-2
    assert all(worst > 0.5 for worst in stale["launches"]), stale["launches"]


def test_cublas_is_bound_once_per_stream(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "blas_binding")
    # Five GEMMs on one stream: one cublasSetStream, one workspace of ours.
    assert r["one_stream"] == [1, 1]
    # Control: every change of stream binds again (to 0x1234, then back).
    assert r["after_two_switches"] == [3, 3]
    assert r["values_ok"]


def test_host_fallbacks_match_the_cpu_ops(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "fallbacks", SHIMKIT_CUDNN="0")  # conv on the host
    assert (r["conv_cpu_device"], r["conv_cuda_device"]) == (0, 1)
    assert r["conv_diff"] == 0.0
    assert r["topk_diff"] == 0.0
    # embedding_bag, index_reduce, scatter_reduce, avg_pool2d, adaptive_max_pool2d (values
    # and indices), baddbmm, nonzero, masked_select, cummax (values and indices), cdist,
    # max_pool2d/3d with indices, avg_pool3d, adaptive_max_pool3d (values and indices),
    # adaptive average pooling 2-D and 3-D, kthvalue and mode (values and indices), median,
    # nanmedian, pdist, addbmm, histc, grid_sampler_3d, the random draws after one seed, and
    # scatter of a tensor and of a value: results on the device, equal to the CPU's.
    assert (r["embedding_bag_cpu_device"], r["embedding_bag_cuda_device"]) == (0, 1)
    assert r["host_ops_equal"] == [True] * 34 and r["embedding_bag_sums"]
    assert r["seeds_cpu_distinct"] == r["seeds_cuda_distinct"] == 16  # control: real draws
    assert r["pooled_shapes"] == [[2, 3, 3, 3], [2, 3, 3, 3], [2, 3, 3, 3]]


def conv_cases(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The 1-D and 2-D cases (the fake cuDNN takes 4-D tensors only)."""
    return {k: v for k, v in r.items() if isinstance(v, dict) and not k.startswith("conv3d")}


def test_conv3d_matches_numpy_through_the_host_where_cudnn_refuses_5d(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    """nn.Conv3d's call on CUDA: the fake cuDNN refuses 5-D descriptors (real cuDNN takes
    them: docs/benchmarks.md), so it runs on the host, right and in ATen's layout."""
    case = scenario(cuda_libs, fakes, "conv")["conv3d"]
    assert case["max_abs_diff"] < 1e-4 and case["strides_match_cpu"]
    assert case["strides"] == [128, 1, 32, 16, 4]  # NDHWC [2, 4, 4, 2, 4]
    assert (case["on_cudnn"], case["on_host"], case["cudnn_executes"]) == (0, 1, 0)
    assert "cudnnSetFilterNdDescriptor" in case["fallback_reason"], case["fallback_reason"]
    # Where ATen's CPU and cuDNN rules differ, the host's result is laid out as cuDNN's.
    batch1 = scenario(cuda_libs, fakes, "conv")["conv3d_batch1"]
    assert batch1["max_abs_diff"] < 1e-4 and batch1["on_host"] == 1
    assert batch1["strides"] == [384, 1, 96, 24, 4]  # NDHWC [1, 4, 4, 4, 6]
    assert not batch1["strides_match_cpu"]  # the CPU shim's own output is contiguous
    # nn.ConvTranspose3d's call: the host too, in ATen's layout.
    transposed = scenario(cuda_libs, fakes, "conv")["conv3d_transposed"]
    assert transposed["max_abs_diff"] < 1e-4 and transposed["strides_match_cpu"]
    assert (transposed["on_host"], transposed["cudnn_executes"]) == (1, 0)


def test_cudnn_convolution_matches_numpy_in_atens_layout(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "conv")
    assert r["cudnn_info"].startswith("cuDNN 90000 (") and r["cudnn_info"].endswith("graph API")
    cases = conv_cases(r)
    assert len(cases) == 10
    assert [name for name, case in cases.items() if case["transposed"]] == [
        "transposed", "transposed_grouped_cl", "transposed_mixed_layouts", "transposed1d"
    ]  # fmt: skip
    for name, case in cases.items():
        assert case["max_abs_diff"] < 1e-4, name
        assert case["strides_match_cpu"], name  # ATen's memory-format rule
        # It ran on cuDNN's graph API (one execute of a true float32 engine: forward, or
        # backward data for a transposed one), not on the host.
        assert (case["on_cudnn"], case["on_host"], case["cudnn_executes"]) == (1, 0, 1), name
        assert (case["cudnn_forward"], case["cudnn_backward_data"]) == (0, 0), name
        assert case["cudnn_tf32_runs"] == 0, name
    assert cases["channels_last"]["strides"] == [320, 1, 40, 5]  # NHWC output
    assert cases["nchw_asymmetric"]["strides"] == [4 * 5 * 5, 5 * 5, 5, 1]  # OH = OW = 5
    # [1, 4, 12, 5] in NHWC: OH = 4 * 2 + (3 - 1) + 1 + 1, OW = 4 - 2 * 1 + 2 * (2 - 1) + 1.
    assert cases["transposed_grouped_cl"]["strides"] == [240, 1, 20, 4]
    # An NCHW filter for a channels_last input: brought into NHWC on the device (no engine
    # takes mixed layouts), never through the host.
    assert [c["cudnn_transform"] for c in cases.values()] == [0, 0, 0, 1, 0, 0, 0, 0, 1, 0]


def test_legacy_api_takes_over_when_the_graph_api_has_no_engine(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    for env in ({"FAKE_CUDNN_GRAPH_REFUSE": "1"}, {"SHIMKIT_CUDNN_API": "legacy"}):
        r = scenario(cuda_libs, fakes, "conv", **env)
        for name, case in conv_cases(r).items():
            assert case["max_abs_diff"] < 1e-4 and case["strides_match_cpu"], (env, name)
            assert (case["on_cudnn"], case["cudnn_executes"]) == (1, 0), (env, name)
            # cudnnConvolutionForward, or cudnnConvolutionBackwardData for a transposed one.
            legacy_calls = (case["cudnn_forward"], case["cudnn_backward_data"])
            assert legacy_calls == ((0, 1) if case["transposed"] else (1, 0)), (env, name)
            assert case["cudnn_tf32_runs"] == 0, (env, name)  # its TF32 algorithm is skipped
        assert conv_cases(r)["mixed_layouts"]["cudnn_transform"] == 1
    assert scenario(cuda_libs, fakes, "conv", SHIMKIT_CUDNN_API="legacy")["cudnn_info"].endswith(
        "legacy API only"
    )


def test_cudnn_tf32_is_an_option_and_off_by_default(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # torch's default math (TF32 in cuDNN convolutions) on request: the fake's tensor-core
    # engine (and legacy TF32 algorithm) rounds inputs to TF32, so results move by ~1e-3.
    # Engines untimed: the fake's take equal time, so timing would pick either of them.
    for env in ({}, {"SHIMKIT_CUDNN_API": "legacy"}):
        cases = conv_cases(
            scenario(
                cuda_libs, fakes, "conv", SHIMKIT_CUDNN_TF32="1", SHIMKIT_CUDNN_AUTOTUNE="0", **env
            )
        )
        for name, case in cases.items():
            assert case["cudnn_tf32_runs"] == 1, (env, name)
            assert 1e-4 < case["max_abs_diff"] < 5e-2, (env, name, case["max_abs_diff"])


def test_one_eager_convolution_is_one_cudnn_execute_once_planned(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    r = scenario(cuda_libs, fakes, "conv_calls")
    # The first call builds the plan (heuristics, one execution plan, a variant pack) and
    # allocates the output and the workspace.
    first = r["first"]
    assert (first["plans_built"], first["cudnn_heuristics"], first["cudnn_exec_plans"]) == (1, 1, 1)
    assert (first["malloc"], first["sync"], first["copy"]) == (2, 0, 0)
    # Then each convolution is one execute and one bias add: no plan, no heuristics, no new
    # variant pack (same pointers), no stream rebinding, no cudaMalloc, no sync, no copy.
    assert r["five_more"] == {
        "plans_built": 0, "malloc": 0, "sync": 0, "copy": 0, "cudnn_heuristics": 0,
        "cudnn_exec_plans": 0, "cudnn_variant_packs": 0, "cudnn_executes": 5,
        "cudnn_forward": 0, "cudnn_add": 5, "cudnn_set_stream": 0, "cudnn_transform": 0,
        "cudnn_slow_runs": 0, "host_fns": 0, "live_events": 0,
    }  # fmt: skip
    # Control: the counters do see plan building; five new geometries build five plans.
    new = r["five_new_geometries"]
    assert (new["plans_built"], new["cudnn_heuristics"], new["cudnn_exec_plans"]) == (5, 5, 5)
    # The legacy API's steady state: one cudnnConvolutionForward and one add per call.
    legacy = scenario(cuda_libs, fakes, "conv_calls", SHIMKIT_CUDNN_API="legacy")["five_more"]
    assert (legacy["cudnn_forward"], legacy["cudnn_add"], legacy["plans_built"]) == (5, 5, 0)
    assert (legacy["cudnn_set_stream"], legacy["malloc"], legacy["sync"]) == (0, 0, 0)


def test_cudnn_engines_are_timed_once_and_the_fastest_kept(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # The fake ranks a slow true-float32 engine (2 ms a run) before a fast one.
    r = scenario(cuda_libs, fakes, "conv_calls", FAKE_CUDNN_SLOW_FIRST="1")
    first = r["first"]
    assert first["cudnn_exec_plans"] == 2  # both float32 engines planned (not the TF32 one)
    assert first["cudnn_slow_runs"] == 1 + 5  # its warm-up and timed runs, then never again
    # Timed on the device: per timed engine, its five runs held behind one host function
    # (the gate) and bracketed by events, then one synchronisation; none afterwards.
    assert (first["sync"], first["host_fns"], first["live_events"]) == (2, 2, 0)
    more = r["five_more"]
    assert (more["cudnn_slow_runs"], more["cudnn_executes"], more["sync"]) == (0, 5, 0)
    for name, case in conv_cases(
        scenario(cuda_libs, fakes, "conv", FAKE_CUDNN_SLOW_FIRST="1")
    ).items():
        assert case["max_abs_diff"] < 1e-4, name
    # Negative control: untimed, cuDNN's first-ranked engine (the slow one) runs every call.
    untimed = scenario(
        cuda_libs, fakes, "conv_calls", FAKE_CUDNN_SLOW_FIRST="1", SHIMKIT_CUDNN_AUTOTUNE="0"
    )
    assert (untimed["first"]["cudnn_exec_plans"], untimed["five_more"]["cudnn_slow_runs"]) == (1, 5)
    # Control: a runtime that cannot time on the device times nothing (no host-clock
    # guess): cuDNN's first-ranked engine is kept, after its one warm-up run.
    blind = scenario(cuda_libs, fakes, "conv_calls", FAKE_CUDNN_SLOW_FIRST="1",
                     FAKE_CUDA_NO_EVENTS="1")  # fmt: skip
    assert (blind["first"]["host_fns"], blind["five_more"]["cudnn_slow_runs"]) == (0, 5)


def test_cudnn_layout_check_catches_a_misread_filter(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # Negative control: a cuDNN that reads NHWC filters as NCHW gives wrong channels_last
    # results, on the graph API and on the legacy one.
    for env in ({}, {"SHIMKIT_CUDNN_API": "legacy"}):
        r = conv_cases(scenario(cuda_libs, fakes, "conv", FAKE_CUDNN_IGNORE_FORMAT="1", **env))
        assert r["channels_last"]["max_abs_diff"] > 1e-2, env
        assert r["transposed_grouped_cl"]["max_abs_diff"] > 1e-2, env
        assert r["nchw_asymmetric"]["max_abs_diff"] < 1e-4, env
        assert r["transposed"]["max_abs_diff"] < 1e-4, env


def test_conv_falls_back_to_the_host_when_cudnn_refuses_or_is_absent(
    cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    refused = "{}Algorithm_v7: CUDNN_STATUS_FAKE"
    for env, reason in (
        ({"FAKE_CUDNN_REFUSE": "1"}, refused),
        ({"SHIMKIT_CUDNN": "0"}, "cuDNN turned off (SHIMKIT_CUDNN=0)"),
        ({"SHIMKIT_CUDNN": "/nonexistent/libcudnn.so.9"}, "cuDNN not found (tried /nonexistent"),
    ):
        cases = conv_cases(scenario(cuda_libs, fakes, "conv", **env))
        for name, case in cases.items():
            assert case["max_abs_diff"] < 1e-4 and case["strides_match_cpu"], (env, name)
            assert (case["on_cudnn"], case["on_host"], case["cudnn_executes"]) == (0, 1, 0)
            assert (case["cudnn_forward"], case["cudnn_backward_data"]) == (0, 0)
            direction = "BackwardData" if case["transposed"] else "Forward"
            expected = reason.format(f"cudnnGetConvolution{direction}")
            assert expected in case["fallback_reason"], (env, case["fallback_reason"])


SANITIZED_SCENARIOS = (
    "basics", "caching", "matmul", "matmul_half", "blas_binding", "fallbacks", "conv",
    "conv_calls", "graph_pools", "captured_host_steps", "captured_random_draws",
    "captured_device_work",
)  # fmt: skip


@pytest.mark.parametrize("name", SANITIZED_SCENARIOS)
def test_scenarios_run_clean_under_asan_ubsan(
    asan_cuda_libs: dict[str, Path], fakes: dict[str, Path], name: str
) -> None:
    done = run_scenario(asan_cuda_libs, fakes, name, **asan_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "runtime error" not in done.stderr  # UBSan


def test_asan_catches_a_double_free(
    asan_cuda_libs: dict[str, Path], fakes: dict[str, Path]
) -> None:
    # Negative control: the sanitized build really is checked in the child.
    done = run_scenario(asan_cuda_libs, fakes, "double_free", **asan_env())
    assert done.returncode != 0
    assert "AddressSanitizer" in done.stderr
