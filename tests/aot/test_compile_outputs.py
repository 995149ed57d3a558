"""`shimkit compile` reports an output the package hands back in another shape than the
exported program gives when it runs (shimkit.aot.outputs, read from the wrapper source the
package carries), by index with both shapes.

torch 2.11's CUDA wrapper for an LSTM hands its final cell state back as [2, 1, 3, 32] for
[2, 3, 32], the shape torch.export recorded on CUDA (running the program gives [2, 3, 32]):
the fast tests read the lines of that wrapper (from the H200 run of 2026-12-03) and a reuse
chain, and run small programs for the reference shapes. The CPU has no such case, so the
slow test gives Inductor one: a custom op whose lowering transposes. The package really
returns the transposed shape (torch's runner too), the warning names that output and no
other; the model's correctly lowered output is the control.

Where torch.export itself records a shape the program does not give when it runs (the
LSTM's case), compile reshapes that output to the run's shape: a custom op whose fake
shape is [2, 1, 3, 4] where it gives [2, 3, 4] then compiles into a package whose outputs
torch's runner hands back as eager does, with a note and no warning (control: without the
reshape, compile warns about that output).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shimkit.aot.outputs import (
    ShapeDisagreement,
    disagreements,
    outputs_in_run_shapes,
    plain_output_tuples,
    recorded_output_shapes,
    run_output_shapes,
    wrapper_output_shapes,
)

# The end of the run function of torch 2.11's CUDA wrapper for tests/models/zoo.py's
# `recurrent` (H200, 2026-12-03), with the lines that make its outputs' buffers.
LSTM_WRAPPER = """
void AOTInductorModel::run_impl(
    AtenTensorHandle* input_handles, AtenTensorHandle* output_handles) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(3, int_array_2, int_array_3, \
cached_torch_dtype_float32, cached_torch_device_type_cuda, this->device_idx_, &buf2_handle));
    auto buf151 = std::move(buf2);  // reuse
    static constexpr int64_t int_array_76[] = {3L, 7L, 5L};
    static constexpr int64_t int_array_77[] = {35L, 5L, 1L};
    static constexpr int64_t int_array_78[] = {2L, 1L, 3L, 32L};
    static constexpr int64_t int_array_79[] = {96L, 96L, 32L, 1L};
    static constexpr int64_t int_array_80[] = {2L, 3L, 32L};
    static constexpr int64_t int_array_81[] = {96L, 32L, 1L};
    auto var_0 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf150, 3, \
int_array_76, int_array_77, 0L));
    auto var_1 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf151, 4, \
int_array_78, int_array_79, 0L));
    auto var_2 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf152, 3, \
int_array_80, int_array_81, 0L));
    output_handles[0] = var_0.release();
    output_handles[1] = var_1.release();
    output_handles[2] = var_2.release();
} // AOTInductorModel::run_impl
""".replace("\\\n", "")

# Outputs made by empty_strided, one through two reuse moves, one with a dynamic size (its
# sizes are not constants: compared by rank only), one a clone of a constant (left out).
REUSED = """
void AOTInductorModel::run_impl(AtenTensorHandle* input_handles) {
    static constexpr int64_t int_array_0[] = {4L, 8L, };
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_0, int_array_1, \
cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf3_handle));
    auto buf7 = std::move(buf3);  // reuse
    auto buf9 = std::move(buf7);  // reuse
    const int64_t int_array_2[] = {s0, 8L};
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_2, int_array_3, \
cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf4_handle));
    output_handles[0] = buf9.release();
    output_handles[1] = buf4.release();
    aoti_torch_clone(w, &output_handles[2]);
} // AOTInductorModel::run_impl
""".replace("\\\n", "")

MODEL = """
import torch
from torch._inductor import lowering as L

aten = torch.ops.aten


@torch.library.custom_op("shimkit_test::transposed", mutates_args=())
def transposed(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@transposed.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("shimkit_test::kept", mutates_args=())
def kept(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@kept.register_fake
def _(x):
    return torch.empty_like(x)


# Inductor's lowerings: `kept` keeps the shape (the control), `transposed` does not (the
# bug under test: [2, 3] is promised, [3, 2] compiled).
L.register_lowering(torch.ops.shimkit_test.kept.default)(
    lambda x: L.lowerings[aten.clone.default](x)
)
L.register_lowering(torch.ops.shimkit_test.transposed.default)(
    lambda x: L.lowerings[aten.clone.default](L.lowerings[aten.permute.default](x, [1, 0]))
)


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        return torch.ops.shimkit_test.kept(x + 1), torch.ops.shimkit_test.transposed(x * 2)


model = TwoOutputs()
example_inputs = (torch.randn(2, 3),)
"""


# torch 2.11's CUDA LSTM in small: an op whose recorded (fake) shape is [2, 1, 3, 4] where it
# gives [2, 3, 4] when it runs; Inductor lowers it to the recorded shape, as it did there.
MISRECORDED = """
import torch
from torch._inductor import lowering as L

aten = torch.ops.aten


@torch.library.custom_op("shimkit_test::cell_state", mutates_args=())
def cell_state(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(2, 3, 4).clone()


@cell_state.register_fake
def _(x):
    return x.new_empty(2, 1, 3, 4)


L.register_lowering(torch.ops.shimkit_test.cell_state.default)(
    lambda x: L.lowerings[aten.clone.default](L.lowerings[aten.view.default](x, [2, 1, 3, 4]))
)


class CellState(torch.nn.Module):
    def forward(self, x):
        return x * 2, torch.ops.shimkit_test.cell_state(x) + 1


model = CellState()
example_inputs = (torch.randn(24),)
"""


def test_the_lstm_wrappers_cell_state_is_found() -> None:
    shapes = wrapper_output_shapes(LSTM_WRAPPER)
    assert shapes == {0: (3, (3, 7, 5)), 1: (4, (2, 1, 3, 32)), 2: (3, (2, 3, 32))}
    found = disagreements(LSTM_WRAPPER, [(3, 7, 5), (2, 3, 32), (2, 3, 32)])
    assert found == [ShapeDisagreement(1, ("2", "1", "3", "32"), ("2", "3", "32"))]
    # Control: the shapes the wrapper really hands back are no disagreement.
    assert disagreements(LSTM_WRAPPER, [(3, 7, 5), (2, 1, 3, 32), (2, 3, 32)]) == []
    # What torch.export recorded on the H200 (diagnosed there): the compiled shape, so the
    # line says where it comes from.
    recorded = [(3, 7, 5), (2, 1, 3, 32), (2, 3, 32)]
    [found] = disagreements(LSTM_WRAPPER, [(3, 7, 5), (2, 3, 32), (2, 3, 32)], recorded)
    assert found.recorded and "torch.export recorded that shape" in found.line("m")


def test_the_reference_is_what_the_program_gives_when_it_runs() -> None:
    torch = pytest.importorskip("torch")

    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.sum(0), x.t()

    exported = torch.export.export(Two(), (torch.ones(2, 3),))
    assert run_output_shapes(torch, exported) == [(3,), (3, 2)]
    assert recorded_output_shapes(exported) == [(3,), (3, 2)]

    class Counts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls.add_(1)
            return x + 1

    mutating = torch.export.export(Counts(), (torch.ones(2),))
    # It runs on copies of its buffers: the program's own buffer is not updated.
    assert run_output_shapes(torch, mutating) == [(2,)]
    assert float(mutating.module().calls[0]) == 0.0
    # Control: running the module itself does update it (so the copies are what keep it).
    mutating.module()(torch.ones(2))
    assert float(mutating.module().calls[0]) == 1.0
    # No example inputs kept (a loaded program): not run, torch.export's shapes are used.
    mutating.example_inputs = None
    assert run_output_shapes(torch, mutating) is None


def test_reuse_moves_are_followed_and_symbolic_sizes_not_guessed() -> None:
    assert wrapper_output_shapes(REUSED) == {0: (2, (4, 8)), 1: (2, None)}
    s0 = object()  # a dynamic size of the exported program (a SymInt there)
    assert disagreements(REUSED, [(4, 8), (s0, 8), (3,)]) == []
    found = disagreements(REUSED, [(4, 9), (s0, 8, 1), (3,)])
    assert [(f.index, f.compiled) for f in found] == [(0, ("4", "8")), (1, ("?", "?"))]
    assert wrapper_output_shapes("no run function here") == {}


def test_the_line_names_the_output_and_both_shapes() -> None:
    line = ShapeDisagreement(1, ("2", "1", "3", "32"), ("2", "3", "32")).line("m.py")
    assert line.startswith("m.py: output 1 is handed back as [2, 1, 3, 32] where the exported ")
    assert "program gives [2, 3, 32]: the blob's (Inductor's) shape" in line and "\n" not in line


def compile_and_run_on_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, model_source: str
) -> tuple[str, dict[str, Any]]:
    """(compile's stderr, torch's runner against eager) for `model_source` compiled with
    `--target libtorch`; torch's runner runs in run_packages.py's own process."""
    pytest.importorskip("torch")
    from shimkit.aot.forward import build_forwarding_library
    from shimkit.cli import main
    from shimkit.config import load_config
    from shimkit.header import find_torch, shim_names

    source, out = tmp_path / f"{name}.py", tmp_path / f"{name}.pt2"
    source.write_text(model_source)
    assert main(["compile", str(source), "-o", str(out), "--target", "libtorch"]) == 0
    err = capsys.readouterr().err
    forwarder = build_forwarding_library(shim_names(find_torch().include_dir), load_config())
    run = Path(__file__).with_name("run_packages.py")
    proc = subprocess.run([sys.executable, str(run), str(forwarder), f"{out}={source}"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [result] = json.loads(proc.stdout.strip().splitlines()[-1]).values()
    return err, result


@pytest.mark.slow
def test_compile_warns_for_an_output_inductor_lowered_in_another_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err, result = compile_and_run_on_torch(tmp_path, capsys, "two_outputs", MODEL)
    warnings = [ln for ln in err.splitlines() if ln.startswith("shimkit: warning: ")]
    assert len(warnings) == 1, err  # output 0, lowered right, is not named
    assert "output 1 is handed back as [3, 2]" in warnings[0]
    assert "exported program gives [2, 3]" in warnings[0]
    # The warning is about the package: torch's own loader returns the compiled shape too.
    assert not result["ok"] and "torch.Size([3, 2]) != torch.Size([2, 3])" in result["detail"]


def test_an_output_recorded_in_another_shape_is_reshaped_to_the_run_shape() -> None:
    torch = pytest.importorskip("torch")
    namespace: dict[str, object] = {}
    exec(MISRECORDED, namespace)  # the test's own model source
    exported = torch.export.export(namespace["model"], namespace["example_inputs"])
    assert recorded_output_shapes(exported) == [(24,), (2, 1, 3, 4)]
    fixed, lines = outputs_in_run_shapes(torch, exported)
    assert recorded_output_shapes(fixed) == [(24,), (2, 3, 4)]
    assert lines == [
        "output 1 reshaped to [2, 3, 4], the shape the program gives when it runs "
        "(torch.export recorded [2, 1, 3, 4], which AOTInductor would compile)"
    ]
    # Control: a program recorded right is left as it is (the same object, no line).
    right = torch.export.export(torch.nn.Flatten(0), (torch.ones(2, 3),))
    assert outputs_in_run_shapes(torch, right) == (right, [])
    # Nor is one that cannot run here (no example inputs): nothing to compare with.
    exported.example_inputs = None
    assert outputs_in_run_shapes(torch, exported) == (exported, [])


@pytest.mark.slow
def test_compile_hands_a_misrecorded_output_back_in_the_run_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err, result = compile_and_run_on_torch(tmp_path, capsys, "cell_state", MISRECORDED)
    assert "shimkit: warning" not in err, err
    assert "output 1 reshaped to [2, 3, 4]" in err
    # torch's runner hands back eager's shape (without the reshape it gives [2, 1, 3, 4],
    # and compile warns about output 1).
    assert result["ok"], result["detail"]


# A model that returns the results of topk and sort as they are (torch.return_types) and
# a named tuple of its own, in a dict.
NAMED_RESULTS = """
from collections import namedtuple

import torch

Pair = namedtuple("Pair", ["doubled", "total"])


class Ranked(torch.nn.Module):
    def forward(self, x):
        return {"ranked": (x.topk(2, -1), (x.sort(-1), Pair(x * 2, x.sum())))}


model = Ranked()
example_inputs = (torch.randn(3, 5),)
"""


def _named_results_program(torch: Any) -> Any:
    namespace: dict[str, Any] = {}
    exec(NAMED_RESULTS, namespace)  # the test's own model source
    return torch.export.export(namespace["model"], namespace["example_inputs"])


def _spec_types(spec: Any) -> list[str]:
    if spec.is_leaf():
        return []
    kids = spec.children() if hasattr(spec, "children") else spec.children_specs
    kind = spec.context if spec.type.__name__ == "namedtuple" else spec.type  # its class
    own = [kind.__name__]
    return own + [name for kid in kids for name in _spec_types(kid)]


def test_named_tuple_outputs_become_plain_tuples() -> None:
    torch = pytest.importorskip("torch")
    exported = _named_results_program(torch)
    named = exported.call_spec.out_spec
    assert _spec_types(named) == ["dict", "tuple", "topk", "tuple", "sort", "Pair"]
    plain, lines = plain_output_tuples(torch, exported)
    kept = ["dict", "tuple", "tuple", "tuple", "tuple", "tuple"]
    assert _spec_types(plain.call_spec.out_spec) == kept
    assert lines == [
        "outputs of named-tuple type Pair, torch.return_types.sort, torch.return_types.topk "
        "are handed back as plain tuples (same values, same order): AOTInductor cannot "
        "package unregistered named tuples"
    ]
    # The same leaves in the same order; the program given is left as it was.
    assert plain.call_spec.out_spec.num_leaves == named.num_leaves == 6
    assert exported.call_spec.out_spec is named
    assert plain.graph_module is exported.graph_module
    # Control: a program without such results is handed back as it is, with no line.
    flat = torch.export.export(torch.nn.Flatten(0), (torch.ones(2, 3),))
    assert plain_output_tuples(torch, flat) == (flat, [])


@pytest.mark.slow
def test_a_model_returning_topk_compiles_and_runs_on_the_slim_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    import numpy as np
    import shimkit.runtime
    from shimkit.cli import main

    source, out = tmp_path / "ranked.py", tmp_path / "ranked.pt2"
    source.write_text(NAMED_RESULTS)
    assert main(["compile", str(source), "-o", str(out)]) == 0
    assert "handed back as plain tuples" in capsys.readouterr().err
    namespace: dict[str, Any] = {}
    exec(NAMED_RESULTS, namespace)
    inputs = namespace["example_inputs"]
    expected = torch.utils._pytree.tree_leaves(namespace["model"](*inputs))
    with shimkit.runtime.load(out) as slim:
        got = slim(*inputs)
    assert len(got) == len(expected) == 6
    for have, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(have, want.numpy(), rtol=1e-6, atol=1e-6)
    # Control: torch's own packaging of the program as exported refuses it.
    with pytest.raises(Exception, match="No registered serialization name"):
        torch._inductor.aoti_compile_and_package(
            _named_results_program(torch), package_path=str(tmp_path / "torch.pt2")
        )
