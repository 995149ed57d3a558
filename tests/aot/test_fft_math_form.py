"""Fourier transforms and complex values in real arithmetic (shimkit.aot.fft).

`torch.fft.*` and `torch.stft` export as `aten._fft_r2c` / `_fft_c2c` / `_fft_c2r` with
complex results, which no slim shim serves (no complex dtypes), so compile refused such
models. Compile now rewrites the transforms into matrix products and carries every complex
value as a pair of real tensors. Here: the rewritten program against torch in float64
(one-sided, full, inverse and multi-dim transforms, every normalisation, STFT and ISTFT,
the ops on complex values), no complex value is left (control: as exported there are),
a program that returns a complex tensor or transforms over a dynamic size is left alone,
the DFT matrices are made on the input's device, and a compiled model runs on the slim CPU
runtime next to eager (control: without the rewrite, compile refuses it naming the op).
Complex values made by `view_as_complex` and complex buffers (rotary embeddings as LLaMA's
reference code writes them) are carried as pairs too, the buffer stored as its real pairs.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
fft = torch.fft

LOG_MEL = Path(__file__).parent / "models" / "log_mel.py"


class Program(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Any:
        return self.fn(x)


def complex_values(exported: Any) -> list[str]:
    from shimkit.aot.fft import complex_values_left

    return complex_values_left(exported)


WINDOW = torch.hann_window(64, dtype=torch.float64)


def _stft(w: Any) -> Any:
    return torch.stft(w, 64, 16, window=WINDOW, return_complex=True)


CASES: dict[str, Callable[..., Any]] = {
    "rfft_abs": lambda x: fft.rfft(x).abs(),
    "rfft_ortho": lambda x: torch.view_as_real(fft.rfft(x, norm="ortho")),
    "rfft_padded_forward": lambda x: torch.view_as_real(fft.rfft(x, n=31, norm="forward")),
    "fft_of_real": lambda x: torch.view_as_real(fft.fft(x)),
    "ifft_of_fft_dim0": lambda x: torch.view_as_real(fft.ifft(fft.fft(x, dim=0), dim=0)),
    "irfft_even": lambda x: fft.irfft(fft.rfft(x) * 0.5),
    "irfft_odd_length": lambda x: fft.irfft(fft.rfft(x), n=19),
    "rfft2": lambda x: torch.view_as_real(fft.rfft2(x)),
    "hfft": lambda x: fft.hfft(fft.ifft(x)),
    "angle": lambda x: fft.rfft(x).angle(),
    "real_imag_conj": lambda x: fft.rfft(x).conj().imag + fft.rfft(x).real,
    "polar": lambda x: fft.irfft(torch.polar(x.abs(), x)[:, :11]),
    "complex_products": lambda x: fft.irfft(fft.rfft(x) * fft.rfft(x.flip(1)).conj(), n=20),
    "complex_quotient": lambda x: (fft.rfft(x) / (fft.rfft(x.flip(1)) + 3.0)).abs(),
    "fftshift": lambda x: fft.fftshift(fft.fft(x), dim=1).abs(),
    "sum_and_cat": lambda x: torch.view_as_real(torch.cat([fft.rfft(x), fft.rfft(x)], 1).sum(0)),
    "complex_dtype_conversion": lambda x: fft.fft(x.to(torch.complex128)).abs(),
}


@pytest.mark.parametrize("name", CASES)
def test_math_form_matches_torch(name: str) -> None:
    from shimkit.aot.fft import fft_in_math_form

    torch.manual_seed(7)
    x = torch.randn(3, 20, dtype=torch.float64)
    program = Program(CASES[name])
    exported = torch.export.export(program, (x,))
    rewritten, count = fft_in_math_form(torch, exported)
    assert count >= 1 and complex_values(rewritten) == []
    got, want = rewritten.module()(x), program(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.allclose(got, want, rtol=0, atol=1e-12), (got - want).abs().max()


@pytest.mark.parametrize(
    "name,fn",
    [
        ("fftn_of_real", lambda y: fft.fftn(y, dim=(1, 2)).real),
        ("irfftn", lambda y: fft.irfftn(fft.rfftn(y, dim=(1, 3)), s=(6, 5), dim=(1, 3))),
    ],
)
def test_multi_dim_transforms_match_torch(name: str, fn: Callable[..., Any]) -> None:
    from shimkit.aot.fft import fft_in_math_form

    torch.manual_seed(8)
    y = torch.randn(2, 6, 8, 5, dtype=torch.float64)
    exported = torch.export.export(Program(fn), (y,))
    assert complex_values(exported)  # control: the exported program has complex values
    rewritten, count = fft_in_math_form(torch, exported)
    assert count >= 1 and complex_values(rewritten) == []
    assert torch.allclose(rewritten.module()(y), fn(y), rtol=0, atol=1e-12)


def test_stft_power_and_istft_round_trip_match_torch() -> None:
    from shimkit.aot.fft import fft_in_math_form

    torch.manual_seed(9)
    wav = torch.randn(2, 400, dtype=torch.float64)
    for fn in (
        lambda w: _stft(w).abs().pow(2),
        lambda w: torch.istft(_stft(w), 64, 16, window=WINDOW, length=400),
    ):
        program = Program(fn)
        rewritten, count = fft_in_math_form(torch, torch.export.export(program, (wav,)))
        assert count >= 1 and complex_values(rewritten) == []
        got, want = rewritten.module()(wav), program(wav)
        assert torch.allclose(got, want, rtol=0, atol=1e-10), (got - want).abs().max()


def test_float32_stays_float32_within_its_precision() -> None:
    from shimkit.aot.fft import fft_in_math_form

    wav = torch.randn(2, 1024)
    program = Program(lambda w: torch.stft(w, 256, 64, return_complex=True).abs())
    rewritten, _ = fft_in_math_form(torch, torch.export.export(program, (wav,)))
    got, want = rewritten.module()(wav), program(wav)
    assert got.dtype == torch.float32
    assert torch.allclose(got, want, rtol=0, atol=1e-4 * float(want.abs().max()))


def test_left_alone_when_a_complex_value_would_remain() -> None:
    from shimkit.aot.fft import fft_in_math_form

    x = torch.randn(3, 20)
    # Returned as it is: the program's output is complex.
    exported = torch.export.export(Program(lambda x: fft.rfft(x)), (x,))
    same, count = fft_in_math_form(torch, exported)
    assert count == 0 and same is exported
    # An op on complex values the rewrite does not know (exp).
    exported = torch.export.export(Program(lambda x: fft.rfft(x).exp().abs()), (x,))
    same, count = fft_in_math_form(torch, exported)
    assert count == 0 and same is exported
    # No transform at all: nothing to do.
    exported = torch.export.export(Program(lambda x: x.abs() * 2), (x,))
    same, count = fft_in_math_form(torch, exported)
    assert count == 0 and same is exported


def test_dynamic_batch_is_rewritten_dynamic_transform_sizes_are_not() -> None:
    from shimkit.aot.fft import fft_in_math_form

    program = Program(lambda x: fft.rfft(x).abs())
    x = torch.randn(3, 20)
    batch = torch.export.Dim("batch", min=1, max=64)
    exported = torch.export.export(program, (x,), dynamic_shapes=({0: batch},))
    rewritten, count = fft_in_math_form(torch, exported)
    assert count == 1 and complex_values(rewritten) == []
    x5 = torch.randn(5, 20)
    assert torch.allclose(rewritten.module()(x5), program(x5), atol=1e-5)
    # A dynamic transform length: the matrices' shape would be symbolic, so the program
    # stays as it is (and compile's check names its fallbacks).
    length = torch.export.Dim("length", min=8, max=64)
    exported = torch.export.export(program, (x,), dynamic_shapes=({1: length},))
    same, count = fft_in_math_form(torch, exported)
    assert count == 0 and same is exported


def test_matrices_are_made_on_the_input_device() -> None:
    # A CUDA program must build its DFT matrices on the GPU. The meta device stands in for
    # it: every value of the rewritten program lives there (a CPU-made matrix would fail
    # the product in the rewrite).
    from shimkit.aot.fft import fft_in_math_form

    program = Program(lambda x: fft.irfft(fft.rfft(x) * 2.0).abs())
    exported = torch.export.export(program, (torch.empty(3, 20, device="meta"),))
    rewritten, count = fft_in_math_form(torch, exported)
    devices = {
        str(node.meta["val"].device)
        for node in rewritten.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }
    assert count == 2 and devices == {"meta"}


@pytest.mark.slow
def test_compiled_math_form_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import numpy as np
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.errors import ShimkitError

    from tests.aot.math_form_run import compile_in_math_form_and_run

    loaded = runpy.run_path(str(LOG_MEL))
    model, inputs = loaded["model"], loaded["example_inputs"]
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "logmel.pt2")
    assert run.notes == [
        "1 Fourier transform or complex-valued call(s) compiled in their math form (DFTs as "
        "matrix products, complex values as real pairs; the slim shims have no complex dtypes)"
    ]
    assert any("aoti_torch_cpu_convolution" in name for name in run.imports)  # control
    assert not any("fft" in name or "complex" in name for name in run.imports)
    (got,), want = run.outputs, model(*inputs).detach().numpy()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4), np.abs(got - want).max()
    # Control: without the rewrite (as for --target libtorch) the blob imports the complex
    # fallbacks, and compile for the slim runtime refuses it, naming them.
    exported, notes = in_math_form(
        torch, torch.export.export(model, inputs), False, False, slim=False
    )
    assert notes == []
    with pytest.raises(ShimkitError, match="_fft_r2c"):
        compile_exported(exported, tmp_path / "raw.pt2", force=True, show_progress=False)


@pytest.mark.slow
def test_shimkit_compile_rewrites_for_slim_targets_only(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from shimkit.aot.pt2 import read_blobs
    from shimkit.cli import main
    from shimkit.elf import read_elf

    def imports(package: Path) -> list[str]:
        [(member, data)] = read_blobs(package).items()
        return [s.name for s in read_elf(data, member).imports]

    assert main(["compile", str(LOG_MEL), "-o", str(tmp_path / "slim.pt2")]) == 0
    assert "1 Fourier transform or complex-valued call(s) compiled" in capsys.readouterr().out
    assert not any("fft" in name for name in imports(tmp_path / "slim.pt2"))
    # torch's runner has complex dtypes and its FFTs: the program is compiled as it is.
    argv = ["compile", str(LOG_MEL), "-o", str(tmp_path / "torch.pt2"), "--target", "libtorch"]
    assert main(argv) == 0
    assert "Fourier" not in capsys.readouterr().out
    assert any(name.endswith("aoti_torch_cpu__fft_r2c") for name in imports(tmp_path / "torch.pt2"))


def test_a_failing_rewrite_leaves_the_program_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    from shimkit.aot import compile as aot_compile

    def broken(torch: Any, exported: Any) -> Any:
        raise RuntimeError("an op this torch decomposes otherwise\n\ntraceback ...")

    monkeypatch.setattr(aot_compile, "fft_in_math_form", broken)
    exported = torch.export.export(Program(lambda x: fft.rfft(x).abs()), (torch.randn(3, 20),))
    same, notes = aot_compile.in_math_form(torch, exported, False, False)
    assert same is exported
    assert notes == [
        "Fourier transform or complex-valued call(s) left as they are (their form failed: "
        "RuntimeError: an op this torch decomposes otherwise)"
    ]


@pytest.mark.parametrize("n", [400, 2048, 97, 120])
def test_long_transforms_in_two_steps_match_torch(n: int) -> None:
    # 400 = 20 x 20, 2048 = 32 x 64 and 120 = 10 x 12 run in two steps (Cooley-Tukey: two
    # products and the twiddle factors); 97, a prime, in one product.
    from shimkit.aot.fft import _split, fft_in_math_form

    assert (_split(n) is None) == (n == 97)
    torch.manual_seed(n)
    x = torch.randn(3, n, 2, dtype=torch.float64)
    program = Program(lambda x: torch.view_as_real(fft.rfft(x, dim=1, norm="ortho")))
    rewritten, count = fft_in_math_form(torch, torch.export.export(program, (x,)))
    assert count == 1
    assert torch.allclose(rewritten.module()(x), program(x), rtol=0, atol=1e-12)


class ComplexRotary(torch.nn.Module):
    """Rotary embeddings as LLaMA's reference code writes them: the query's pairs as complex
    numbers (`view_as_complex`) times a complex `freqs_cis` buffer, read back with
    `view_as_real`."""

    def __init__(self, length: int = 6, dim: int = 8) -> None:
        super().__init__()
        inverse = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        angles = torch.outer(torch.arange(length).float(), inverse)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x: Any) -> Any:  # [batch, length, dim]
        pairs = torch.view_as_complex(self.proj(x).reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * self.freqs_cis).flatten(-2)


def test_complex_buffers_and_view_as_complex_are_carried_as_pairs() -> None:
    from shimkit.aot.fft import complex_values_left, fft_in_math_form

    model, x = ComplexRotary().eval(), torch.randn(2, 6, 8)
    with torch.no_grad():
        exported = torch.export.export(model, (x,))
        assert complex_values_left(exported)  # control: as exported
        rewritten, count = fft_in_math_form(torch, exported)
        assert count == 2  # the view_as_complex call and the complex buffer
        assert complex_values_left(rewritten) == []
        assert not rewritten.state_dict["freqs_cis"].is_complex()
        torch.testing.assert_close(rewritten.module()(x), model(x), rtol=1e-6, atol=1e-6)


def test_a_complex_parameter_is_stored_as_a_real_parameter() -> None:
    from shimkit.aot.fft import fft_in_math_form

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, dtype=torch.complex64))

        def forward(self, x: Any) -> Any:
            return torch.view_as_real(torch.view_as_complex(x) * self.w)

    model, x = Scaled().eval(), torch.randn(3, 4, 2)
    with torch.no_grad():
        rewritten, count = fft_in_math_form(torch, torch.export.export(model, (x,)))
        weight = rewritten.state_dict["w"]
        assert count == 2 and isinstance(weight, torch.nn.Parameter) and weight.shape == (4, 2)
        torch.testing.assert_close(rewritten.module()(x), model(x), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_compiled_complex_rotary_runs_on_the_slim_runtime(tmp_path: Any) -> None:
    import numpy as np

    from tests.aot.math_form_run import compile_in_math_form_and_run

    model, inputs = ComplexRotary().eval(), (torch.randn(2, 6, 8),)
    run = compile_in_math_form_and_run(torch, model, inputs, tmp_path / "rotary.pt2")
    assert run.notes and "complex values as real pairs" in run.notes[0]
    assert not any("complex" in name for name in run.imports)
    with torch.no_grad():
        want = model(*inputs).numpy()
    np.testing.assert_allclose(run.outputs[0], want, rtol=1e-5, atol=1e-6)
