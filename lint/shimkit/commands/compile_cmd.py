"""`shimkit compile`: a model file or saved ExportedProgram -> a .pt2 with a prefixed blob."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shimkit.aot.targets import DEFAULT_TARGET, TARGETS
from shimkit.config import load_config
from shimkit.errors import ShimkitError

HELP = "compile MODEL.py (or a saved ExportedProgram) into a .pt2 whose blob imports prefixed shims"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", metavar="MODEL", help="a .py file, or a torch.export.save .pt2/.ep"
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="OUT.pt2", help="the package to write"
    )
    parser.add_argument("--model-attr", default="model", help="the nn.Module's name in MODEL.py")
    parser.add_argument(
        "--inputs-attr", default="example_inputs", help="the example inputs' name in MODEL.py"
    )
    parser.add_argument(
        "--dynamic-shapes-attr",
        default="dynamic_shapes",
        help="the name in MODEL.py of torch.export's dynamic_shapes for the example inputs "
        "(optional there; without it every size is the example's)",
    )
    parser.add_argument("--force", action="store_true", help="replace OUT.pt2 if it exists")
    parser.add_argument(
        "--target",
        choices=tuple(TARGETS),
        default=None,
        help="the runtime the package must load on; its blobs are checked against that "
        f"runtime's shims before the package is written (default: {DEFAULT_TARGET}, "
        "slim-cuda with --device cuda)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="compile for this device (the model and its example inputs are moved there; "
        "CUDA blobs get their kernels embedded); cuda needs a CUDA build of torch and a GPU "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--decompose-attention",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile scaled_dot_product_attention in its math form, so Inductor generates the "
        "kernels instead of calling a fused fallback the slim shims may lack "
        "(default: on for cuda, off for cpu)",
    )


def run(args: argparse.Namespace) -> int:
    # torch is imported only here, so `shimkit --help` stays fast without it.
    from shimkit.aot.compile import (
        compile_exported,
        export_program_on,
        in_math_form,
        moved_to_device,
        on_device_of,
    )
    from shimkit.aot.modelfile import EXPORTED_SUFFIXES, load_exported_program, load_model_file
    from shimkit.aot.torchenv import require_torch
    from shimkit.fileio import check_output

    config = load_config(args.config)
    source = Path(args.model)
    output = Path(args.output)
    cuda = args.device == "cuda"
    target = args.target or ("slim-cuda" if cuda else DEFAULT_TARGET)
    if target == ("slim-cpu" if cuda else "slim-cuda"):
        raise ShimkitError(
            f"--target {target} does not run blobs compiled for --device {args.device}"
        )
    torch = require_torch()
    if cuda:
        from shimkit.aot.cuda import require_cuda_torch

        require_cuda_torch(torch)
    check_output(output, args.force)  # fail before the (slow) export
    if source.suffix in EXPORTED_SUFFIXES:
        exported = load_exported_program(source, torch)
        if cuda:
            exported = moved_to_device(torch, exported, str(source), "cuda")
        export_notes: list[str] = []
    else:
        loaded = load_model_file(
            source, torch, args.model_attr, args.inputs_attr, args.dynamic_shapes_attr
        )
        model = loaded.model.to(args.device)
        inputs = tuple(on_device_of(value, args.device) for value in loaded.inputs)
        exported, export_notes = export_program_on(
            torch, model, inputs, str(source), args.device, loaded.dynamic_shapes
        )
    attention = cuda if args.decompose_attention is None else args.decompose_attention
    # torch's runner has the fused CUDA RNN cells (through its proxy executor), complex dtypes
    # with its FFTs, and CUDA topk and embedding bags; a slim runtime has none of them (the
    # slim CUDA shims select and pool on the host; Inductor's forms stay on the device).
    slim = target != "libtorch"
    exported, form_notes = in_math_form(
        torch, exported, attention, rnn_cells=cuda and slim, slim=slim, slim_cuda=cuda and slim
    )
    for note in export_notes + form_notes:
        print(f"{source}: {note}")
    result = compile_exported(
        exported,
        output,
        config=config,
        force=args.force,
        label=str(source),
        target=target,
        device=args.device,
    )
    for name, image in result.blobs.items():
        prefixed = [s for s in image.imports if config.is_prefixed_family(s.name)]
        how = "torch's shim_symbol_prefix" if result.native_prefix else "the rename header"
        kernels = ", CUDA kernels embedded" if cuda else ""
        print(
            f"{result.path}: {name}: {len(prefixed)} prefixed shim imports ({how}), all "
            f"defined by --target {target}{kernels}, no libtorch NEEDED, "
            f"{len(image.exports)} exports"
        )
    for line in result.notes:
        print(f"shimkit: note: {line}", file=sys.stderr)
    for line in result.shape_warnings:
        print(f"shimkit: warning: {line}", file=sys.stderr)
    return 0
