"""`shimkit compile`: a model file or saved ExportedProgram -> a .pt2 with a prefixed blob."""

from __future__ import annotations

import argparse
from pathlib import Path

from shimkit.aot.targets import DEFAULT_TARGET, TARGETS
from shimkit.config import load_config

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
    parser.add_argument("--force", action="store_true", help="replace OUT.pt2 if it exists")
    parser.add_argument(
        "--target",
        choices=tuple(TARGETS),
        default=DEFAULT_TARGET,
        help="the runtime the package must load on; its blobs are checked against that "
        "runtime's shims before the package is written (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    # torch is imported only here, so `shimkit --help` stays fast without it.
    from shimkit.aot.compile import compile_exported, export_program
    from shimkit.aot.modelfile import EXPORTED_SUFFIXES, load_exported_program, load_model_file
    from shimkit.aot.torchenv import require_torch
    from shimkit.fileio import check_output

    config = load_config(args.config)
    source = Path(args.model)
    output = Path(args.output)
    torch = require_torch()
    check_output(output, args.force)  # fail before the (slow) export
    if source.suffix in EXPORTED_SUFFIXES:
        exported = load_exported_program(source, torch)
    else:
        model, inputs = load_model_file(source, torch, args.model_attr, args.inputs_attr)
        exported = export_program(torch, model, inputs, str(source))
    result = compile_exported(
        exported, output, config=config, force=args.force, label=str(source), target=args.target
    )
    for name, image in result.blobs.items():
        prefixed = [s for s in image.imports if config.is_prefixed_family(s.name)]
        how = "torch's shim_symbol_prefix" if result.native_prefix else "the rename header"
        print(
            f"{result.path}: {name}: {len(prefixed)} prefixed shim imports ({how}), all "
            f"defined by --target {args.target}, no libtorch NEEDED, {len(image.exports)} exports"
        )
    return 0
