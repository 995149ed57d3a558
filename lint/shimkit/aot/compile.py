"""Compile a model into a .pt2 whose blob imports only prefixed shim names.

With a torch that has `aot_inductor.shim_symbol_prefix`, torch renames the
imports itself. Otherwise the generated rename header is force-included
through a compiler wrapper (`cpp.cxx`). Either way the blob is linked
without libtorch, without an executable stack, and exports only its
`AOTInductor*` entry points. Before the package is moved into place every
blob is linted (`shimkit.checks.blob`: no finding at all, errors or warnings)
against the shims of its target runtime (`shimkit.aot.targets`): the package
loads there, or compile fails naming each missing shim and the fix. An output
whose shape torch.export recorded wrongly is reshaped to the one the program
gives when it runs, and an output the package still hands back in another
shape than the exported program's is reported by index (`shimkit.aot.outputs`,
from the wrapper source it carries).
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from shimkit.aot.antialias import antialiased_resize_in_math_form
from shimkit.aot.attention import decompose_attention as attention_in_math_form
from shimkit.aot.baddbmm import batched_products_in_bmm_form
from shimkit.aot.counting import counting_in_math_form
from shimkit.aot.distance import distances_in_direct_form
from shimkit.aot.embedding import embedding_renorm_in_math_form
from shimkit.aot.embedding_bag import embedding_bag_in_math_form
from shimkit.aot.fake_quantize import fake_quantize_in_math_form
from shimkit.aot.fft import fft_in_math_form
from shimkit.aot.grid_sample import grid_sampler_3d_in_math_form
from shimkit.aot.histogram import histograms_in_index_add_form
from shimkit.aot.incomplete_gamma import incomplete_gammas_in_series_form
from shimkit.aot.indexing import masks_in_integer_form
from shimkit.aot.inductor_options import (
    CPU_INFERENCE_OPTIONS,
    CUDA_INFERENCE_OPTIONS,
    embed_kernels,
    forget_vector_instructions,
    inductor_configs,
    unfreezable_calls,
)
from shimkit.aot.linalg import SIZE_LIMIT, linalg_in_math_form
from shimkit.aot.median import median_in_math_form, whole_medians_in_sort_form
from shimkit.aot.merge_sort import long_sorts_in_merge_form
from shimkit.aot.mode import modes_in_dense_form
from shimkit.aot.modelfile import one_paragraph, quiet_torch_logs
from shimkit.aot.outputs import (
    disagreements,
    outputs_in_run_shapes,
    plain_output_tuples,
    recorded_output_shapes,
    run_output_shapes,
)
from shimkit.aot.polygamma import polygammas_in_series_form
from shimkit.aot.pooling import pools_in_masked_form
from shimkit.aot.pt2 import read_blobs, read_wrapper_sources
from shimkit.aot.rnn_cells import decompose_rnn_cells as rnn_cells_in_math_form
from shimkit.aot.sampling import multinomial_in_math_form
from shimkit.aot.scatter import plain_scatters_in_generated_form, scatter_reductions_in_dense_form
from shimkit.aot.selection import selection_in_sort_form
from shimkit.aot.targets import DEFAULT_TARGET, Target, provided_names, target_named
from shimkit.aot.torchenv import require_torch
from shimkit.aot.weight_layout import linear_weights_column_major
from shimkit.checks.blob import blob_findings, describe, read_blob_image
from shimkit.checks.companions import proxy_executor_ops
from shimkit.checks.model import Finding
from shimkit.config import ShimConfig, load_config
from shimkit.elf import ElfImage
from shimkit.errors import ShimkitError
from shimkit.fileio import check_output, private_tempdir, staged_output
from shimkit.header import find_torch, shim_names
from shimkit.progress import progress


@dataclass
class CompileResult:
    path: Path
    blobs: dict[str, ElfImage]  # by .pt2 member
    native_prefix: bool  # torch renamed the shims itself
    target: str | None  # the runtime the blobs were checked against (None: not checked)
    # One line per output the package hands back in another shape than the exported program's.
    shape_warnings: list[str]
    # What compile did differently from its usual options, one line each.
    notes: list[str] = field(default_factory=list)


def _exported(torch: ModuleType, model: Any, inputs: tuple[Any, ...], dynamic_shapes: Any) -> Any:
    model.eval()
    # torch prints the partial graph of a failed export to sys.stderr; hold
    # stderr back and replay it only if the export succeeds. Traced without
    # autograd, as an inference compile: with it, ops that have no derivative for
    # an argument computed from a parameter (a per-channel fake-quantize scale
    # taken from the weight) fail the export, though eager inference runs them.
    captured = io.StringIO()
    with quiet_torch_logs(), contextlib.redirect_stderr(captured), torch.no_grad():
        exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    sys.stderr.write(captured.getvalue())
    return exported


def export_program_on(
    torch: ModuleType,
    model: Any,
    inputs: tuple[Any, ...],
    label: str,
    device: str,
    dynamic_shapes: Any = None,
) -> tuple[Any, list[str]]:
    """torch.export.export of a model and inputs on `device` (with `dynamic_shapes`, torch's
    argument), and a note if it was exported elsewhere; torch's reason as one paragraph on
    failure. Where torch.export fails on a GPU but not on the CPU, the program exported on
    the CPU is moved to the device: torch's symbolic shapes can fail to prove a GPU kernel's
    stride guards for a dynamic size (a grouped-query attention with a dynamic sequence length
    on CUDA, torch 2.11: "Constraints violated (seq)"), guards a CPU export does not make.
    The model is back on `device` afterwards; if both exports fail, the error is the
    device's."""
    try:
        return _exported(torch, model, inputs, dynamic_shapes), []
    except Exception as exc:
        if device == "cpu":
            raise ShimkitError(f"{label}: torch.export failed: {one_paragraph(exc)}") from None
        on_device = ShimkitError(f"{label}: torch.export failed on {device}: {one_paragraph(exc)}")
        reason = one_paragraph(exc, 160)
    try:
        cpu_inputs = tuple(on_device_of(value, "cpu") for value in inputs)
        exported = _exported(torch, model.to("cpu"), cpu_inputs, dynamic_shapes)
        exported = moved_to_device(torch, exported, label, device)
    except Exception:
        raise on_device from None
    finally:
        model.to(device)
    return exported, [
        f"torch.export failed on {device} ({reason}); the program exported on the CPU was "
        f"moved to {device} (torch.export.passes.move_to_device_pass; it may keep views "
        f"laid out for the CPU's kernels: if compiling it fails, fix the {device} export)"
    ]


def on_device_of(value: Any, device: str) -> Any:
    """`value` on `device` if it is a tensor (anything with .to), else as it is."""
    to = getattr(value, "to", None)
    return to(device) if callable(to) else value


def moved_to_device(torch: ModuleType, exported: Any, label: str, device: str) -> Any:
    """`exported` with its parameters, buffers, constants and device arguments on `device`."""
    try:  # a submodule torch.export does not import itself
        from torch.export.passes import move_to_device_pass
    except ImportError:
        raise ShimkitError(
            f"{label}: torch {torch.__version__} cannot move an ExportedProgram to {device} "
            "(no torch.export.passes.move_to_device_pass); export it there"
        ) from None
    return move_to_device_pass(exported, device)


def prepare_output(output: str | Path, force: bool) -> Path:
    """`output` as a Path, refused unless it ends in .pt2 and may be (over)written."""
    out = Path(output)
    if out.suffix != ".pt2":
        raise ShimkitError(f"{out}: the output must end in .pt2")
    check_output(out, force)
    return out


def stop_compile_workers() -> None:
    """Shuts down the compile-worker pools torch started in this process.

    torch keeps them for the process, and they inherited the compile's private TMPDIR,
    which is removed when the compile ends: a later compile in the same process (a
    notebook, a script compiling several models) would send its Triton kernels to workers
    that write their .ptx into the removed folder (found on CUDA: every compile after the
    first failed). The next compile starts fresh workers in its own folder.
    """
    import torch._inductor.async_compile as async_compile

    async_compile.shutdown_compile_workers()


def package_blobs(
    torch: ModuleType,
    exported: Any,
    temp: Path,
    options: dict[str, Any],
    label: str,
    location: Path,
    show_progress: bool = False,
) -> dict[str, ElfImage]:
    """Run AOTInductor on `exported` into the .pt2 `temp`; its blobs, named `location:<member>`.

    The compilers it starts get a private TMPDIR: on Ctrl-C or SIGTERM they are stopped
    and their scratch files (gcc's ccXXXX.s, ...) go with that folder.
    """
    try:
        with private_tempdir("compile"):
            try:
                if show_progress:
                    with progress(f"compiling {label} with AOTInductor"):
                        torch._inductor.aoti_compile_and_package(
                            exported, package_path=str(temp), inductor_configs=options
                        )
                else:
                    torch._inductor.aoti_compile_and_package(
                        exported, package_path=str(temp), inductor_configs=options
                    )
            finally:
                stop_compile_workers()
    except ShimkitError:
        raise
    except Exception as exc:
        raise ShimkitError(f"{label}: AOTInductor compile failed: {one_paragraph(exc)}") from None
    return {
        name: read_blob_image(data, f"{location}:{name}") for name, data in read_blobs(temp).items()
    }


def shape_warnings(torch: ModuleType, exported: Any, package: Path, label: str) -> list[str]:
    """One line per output a blob of `package` hands back in another shape than `exported`
    gives when it runs (torch.export's recorded shapes where it cannot run here;
    `shimkit.aot.outputs`)."""
    recorded = recorded_output_shapes(exported)
    shapes = run_output_shapes(torch, exported)
    if shapes is None or len(shapes) != len(recorded):
        shapes = recorded
    return [
        found.line(label)
        for source in read_wrapper_sources(package).values()
        for found in disagreements(source, shapes, recorded)
    ]


def blob_problems(
    image: ElfImage,
    config: ShimConfig,
    target: Target | None = None,
    providers: frozenset[str] | None = None,
) -> list[Finding]:
    """What keeps a compiled blob from being what compile promises: every finding of the
    linter, warnings included (compile controls the blob's exports), with SK004 closed
    over `providers` (the target's shims); SK009 (proxy executor) only where the target
    has none."""
    findings = blob_findings(image, config, providers=providers)
    if target is not None and target.has_proxy_executor:
        findings = [f for f in findings if f.rule_id != "SK009"]
    return findings


def problems_line(
    image: ElfImage,
    findings: list[Finding],
    target: Target | None,
    proxy_ops: list[str] | None = None,
) -> str:
    """One line for a failed blob: the shims its target lacks (each named), the ops it
    leaves to libtorch's proxy executor (`proxy_ops`, named where the package lists
    them), then the rest."""
    missing = sorted({f.symbol for f in findings if f.rule_id == "SK004" and f.symbol})
    parts = []
    if missing and target is not None:
        parts.append(
            f"{len(missing)} shim(s) it imports are not defined by {target.runtime} "
            f"(--target {target.name}): {', '.join(missing)} (fix: {target.fix})"
        )
    named = proxy_ops if any(f.rule_id == "SK009" for f in findings) else None
    if named:
        parts.append(
            f"{len(named)} op(s) have no C shim and need libtorch's proxy executor (absent "
            f"from {target.runtime if target else 'a slim runtime'}): {', '.join(named)} "
            "(fix: replace the op, or compile with --target libtorch to run under torch's "
            "runner)"
        )
    others = [f for f in findings if f.rule_id != "SK004" and not (named and f.rule_id == "SK009")]
    if others:
        parts.append(describe(others))
    return f"{image.location}: compiled blob fails the linter: {'; '.join(parts)}"


def compile_exported(
    exported: Any,
    output: str | Path,
    config: ShimConfig | None = None,
    force: bool = False,
    label: str | None = None,
    show_progress: bool = True,
    target: str | None = DEFAULT_TARGET,
    device: str = "cpu",
) -> CompileResult:
    """Compile an ExportedProgram into a prefixed .pt2 at `output` (atomically), its blobs
    checked against `target`'s shims (`shimkit.aot.targets`; None: no closure check).
    `device` "cuda" (a program exported on CUDA) also embeds the kernels in the blob."""
    torch = require_torch()
    config = config or load_config()
    out = prepare_output(output, force)
    chosen = target_named(target) if target is not None else None
    providers = provided_names(chosen, config) if chosen is not None else None
    names = shim_names(find_torch().include_dir)
    options, native = inductor_configs(torch, config, names)
    if device == "cuda":
        embed_kernels(torch, options)
        options.update(CUDA_INFERENCE_OPTIONS)
    else:
        options.update(CPU_INFERENCE_OPTIONS)
    forget_vector_instructions(torch)
    label = label or str(out)
    notes: list[str] = []
    unfreezable = unfreezable_calls(exported) if options.get("freezing") else []
    if unfreezable:
        options["freezing"] = False
        notes.append(
            f"{label}: compiled without freezing: Inductor cannot freeze a program that calls "
            f"{', '.join(unfreezable)}; the weights are not folded into constants (slower, same "
            "results)"
        )
    exported, reshaped = outputs_in_run_shapes(torch, exported)
    notes.extend(f"{label}: {line}" for line in reshaped)
    exported, retyped = plain_output_tuples(torch, exported)
    notes.extend(f"{label}: {line}" for line in retyped)
    if device == "cpu":
        # A layout, not a rewrite (same values, same graph): no note.
        exported, _ = linear_weights_column_major(torch, exported)
    with staged_output(out) as temp, torch.no_grad():
        blobs = package_blobs(torch, exported, temp, options, label, out, show_progress)
        problems = {
            member: found
            for member, image in blobs.items()
            if (found := blob_problems(image, config, chosen, providers))
        }
        if problems:
            proxy_ops = proxy_executor_ops(temp)
            failed = [
                problems_line(blobs[member], found, chosen, proxy_ops.get(member))
                for member, found in problems.items()
            ]
            raise ShimkitError("; ".join(failed))
        warnings = shape_warnings(torch, exported, temp, label)
    return CompileResult(
        path=out,
        blobs=blobs,
        native_prefix=native,
        target=target,
        shape_warnings=warnings,
        notes=notes,
    )


def in_math_form(
    torch: ModuleType,
    exported: Any,
    attention: bool,
    rnn_cells: bool,
    slim: bool = True,
    slim_cuda: bool = False,
) -> tuple[Any, list[str]]:
    """`exported` with the fallbacks asked for rewritten into their math form, so Inductor
    generates their kernels (`shimkit.aot.attention`, `shimkit.aot.rnn_cells`; `slim`: what the
    slim targets need and torch's runner does not, on either device: Fourier transforms and
    complex values in real arithmetic, `shimkit.aot.fft`, linear algebra on small matrices,
    `shimkit.aot.linalg`, and indexing by boolean masks, `shimkit.aot.indexing`; `slim_cuda`:
    for a slim CUDA target, ops its shims would run on the host, in forms Inductor generates on
    the GPU: topk and kthvalue along a static dim as a sort, `shimkit.aot.selection`; sorts
    along a dim longer than Inductor's own, `.merge_sort`; sum, mean and max embedding bags,
    `.embedding_bag`; direct cdist/pdist, `.distance`; baddbmm/addbmm, `.baddbmm`;
    amax/amin/prod/mean, boolean and int64 scatters, `.scatter`; the average and adaptive pools
    Inductor leaves to fallbacks, `.pooling`; histc, `.histogram`; mode, `.mode`; whole-tensor
    medians, `.median`; digamma, polygamma and zeta, `.polygamma`; the incomplete gamma
    functions, `.incomplete_gamma`), and one note per kind rewritten,
    saying so. 3-D grid sampling, antialiased resizing, medians along a dim, multinomial
    sampling, bincount, unique and norm-limited embedding lookups are always rewritten where
    the installed torch has no C shim for them
    (`shimkit.aot.grid_sample`, `.antialias`, `.median`, `.sampling`, `.counting`,
    `.embedding`), and so is fake quantization (`.fake_quantize`): their blobs could not load
    otherwise."""
    # (wanted, the form, what it rewrites, how: the note says "<count> <what> <how>").
    # The embedding form first: it rewrites the in-place renorm as exported, which the others'
    # run_decompositions would turn into a functional op and a write to the weight.
    rewrites = [
        (True, embedding_renorm_in_math_form, "norm-limited embedding lookup(s) (max_norm)",
         "compiled in their math form (each looked-up row scaled; the weight is not written "
         "back; this torch has no C shim for embedding_renorm)"),
        (True, grid_sampler_3d_in_math_form, "grid_sampler_3d call(s)",
         "compiled in their math form (this torch has no C shim for it; Inductor generates the "
         "kernel)"),
        (True, antialiased_resize_in_math_form, "antialiased resize call(s)",
         "compiled in their math form (this torch has no C shim for them; Inductor generates the "
         "kernels)"),
        (True, median_in_math_form, "median/nanmedian call(s) along a dim",
         "compiled in their math form (a stable sort; this torch has no C shim for them)"),
        (True, multinomial_in_math_form, "multinomial call(s)",
         "compiled in their math form (Gumbel-max over the runtime's random draws; this torch "
         "has no C shim for it)"),
        (True, counting_in_math_form, "bincount/unique call(s)",
         "compiled in their math form (sizes read from the data; this torch has no C shim for "
         "them)"),
        (True, fake_quantize_in_math_form, "fake quantization call(s) (per tensor or channel)",
         "compiled in their math form (ATen's rounding, bit for bit; this torch has no C shim "
         "for them)"),
        (attention, attention_in_math_form, "scaled_dot_product_attention call(s)",
         "compiled in their math form (Inductor generates the kernels; no attention fallback "
         "shim)"),
        (rnn_cells, rnn_cells_in_math_form, "GRU/LSTM cell call(s)",
         "compiled in their math form (Inductor generates the kernels; torch's fused CUDA cells "
         "have no C shim)"),
        # After the multinomial and median forms above: they select with topk and sort.
        (slim_cuda, selection_in_sort_form, "topk/kthvalue call(s)",
         "compiled as a stable sort and a slice (Inductor generates the sort on CUDA; the slim "
         "CUDA shims would select on the host)"),
        # After the forms that sort (selection, medians, multinomial): a sort they made
        # along a long dim is merge-sorted too.
        (slim_cuda, long_sorts_in_merge_form, "sort call(s) along a dim longer than 512",
         "compiled as chunk sorts and merges (Inductor generates the kernels on CUDA; the slim "
         "CUDA shims would sort on the host)"),
        (slim_cuda, embedding_bag_in_math_form, "embedding bag(s)",
         "compiled as a lookup and a segment sum or maximum (Inductor generates the kernels on "
         "CUDA; the slim CUDA shims would pool on the host)"),
        (slim_cuda, distances_in_direct_form, "cdist/pdist call(s)",
         "computed directly from the pairwise differences (Inductor generates the kernels on "
         "CUDA; the slim CUDA shims would compute them on the host)"),
        (slim_cuda, batched_products_in_bmm_form, "baddbmm/addbmm call(s)",
         "compiled as a bmm and a scaled sum (cuBLAS and Inductor on CUDA; the slim CUDA shims "
         "would compute them on the host)"),
        (slim_cuda, plain_scatters_in_generated_form, "scatter call(s) of boolean or int64 values",
         "compiled as byte scatters or as a scatter of positions and a gather (Inductor "
         "generates them on CUDA; it leaves such scatters to a fallback, which the slim CUDA "
         "shims would run on the host)"),
        (slim_cuda, scatter_reductions_in_dense_form,
         "scatter_reduce/index_reduce call(s) (amax, amin, prod, mean)",
         "compiled as dense comparisons (Inductor generates the kernels on CUDA; the slim CUDA "
         "shims would reduce on the host)"),
        (slim_cuda, pools_in_masked_form, "average or adaptive pool(s)",
         "compiled as masked reductions (Inductor generates the kernels on CUDA; the slim CUDA "
         "shims would pool on the host)"),
        (slim_cuda, histograms_in_index_add_form, "histc call(s)",
         "compiled as bin indices and an index-add (Inductor generates the kernels on CUDA; the "
         "slim CUDA shims would count on the host)"),
        (slim_cuda, modes_in_dense_form, "mode call(s)",
         "compiled as dense comparisons (Inductor generates the kernels on CUDA; the slim CUDA "
         "shims would count on the host)"),
        (slim_cuda, whole_medians_in_sort_form, "whole-tensor median/nanmedian call(s)",
         "compiled as a stable sort and a pick (Inductor generates the sort on CUDA; the slim "
         "CUDA shims would select on the host)"),
        (slim_cuda, polygammas_in_series_form, "digamma/polygamma/zeta call(s)",
         "compiled in ATen's series form (Inductor generates it on CUDA; this torch has no C "
         "shim for them)"),
        (slim_cuda, incomplete_gammas_in_series_form, "igamma/igammac call(s)",
         "compiled as a series, a continued fraction and Temme's expansion (Inductor generates "
         "them on CUDA; the slim CUDA shims have no igamma)"),
        (slim, masks_in_integer_form, "boolean-mask or cross-device index call(s)",
         "compiled as integer indexing on the indexed tensor's device (a mask's nonzero "
         "positions; Inductor generates the gather; the slim shims have no general index)"),
        (slim, linalg_in_math_form,
         "linear algebra call(s) (inv, solve, det, slogdet, cholesky, triangular solves, qr, "
         "svd, eigh, pinv)",
         f"compiled in their math form (LU, Cholesky, Householder and Jacobi steps on matrices "
         f"of at most {SIZE_LIMIT} rows and columns; this torch has no C shim for them; a "
         "singular matrix gives inf/NaN, not an error)"),
        # Last, on what the others made; for the slim targets only.
        (slim, fft_in_math_form, "Fourier transform or complex-valued call(s)",
         "compiled in their math form (DFTs as matrix products, complex values as real pairs; "
         "the slim shims have no complex dtypes)"),
    ]  # fmt: skip
    notes = []
    for wanted, rewrite, what, how in rewrites:
        if not wanted:
            continue
        try:
            exported, count = rewrite(torch, exported)
        except Exception as exc:  # the program stays as it was; the closure check names its ops
            failed = one_paragraph(exc, 300)
            notes.append(f"{what} left as they are (their form failed: {failed})")
            continue
        if count:
            notes.append(f"{count} {what} {how}")
    return exported, notes


def compile_model(
    model: Any,
    example_inputs: tuple[Any, ...],
    output: str | Path,
    config: ShimConfig | None = None,
    force: bool = False,
    show_progress: bool = True,
    target: str | None = DEFAULT_TARGET,
    device: str = "cpu",
    decompose_attention: bool = False,
    decompose_rnn_cells: bool = False,
    dynamic_shapes: Any = None,
) -> CompileResult:
    """Export `model` on `example_inputs` and compile it into a prefixed .pt2 (see
    compile_exported; `decompose_attention` and `decompose_rnn_cells`: those fallbacks in
    their math form first, `in_math_form`; the slim targets' forms too (Fourier transforms,
    linear algebra, mask indexing), unless for libtorch; `dynamic_shapes`: torch.export's
    argument, for sizes the package takes at run time)."""
    torch = require_torch()
    label = type(model).__name__
    exported, export_notes = export_program_on(
        torch, model, tuple(example_inputs), label, device, dynamic_shapes
    )
    slim = target != "libtorch"
    exported, form_notes = in_math_form(
        torch,
        exported,
        decompose_attention,
        decompose_rnn_cells,
        slim=slim,
        slim_cuda=slim and device == "cuda",
    )
    result = compile_exported(
        exported,
        output,
        config=config,
        force=force,
        label=label,
        show_progress=show_progress,
        target=target,
        device=device,
    )
    result.notes[:0] = export_notes + form_notes
    return result
