"""`shimkit run`: run a prefixed blob (.pt2 or .so) on the slim runtime."""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shimkit.config import load_config
from shimkit.errors import ShimkitError
from shimkit.fileio import write_atomically

if TYPE_CHECKING:
    from shimkit.runtime.blob import InputSpec

HELP = (
    "run a prefixed AOTInductor blob (.pt2 or .so) on the slim CPU or CUDA runtime, "
    "without libtorch"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("blob", type=Path, help="a .pt2 package or a blob .so")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=Path,
        metavar="X.npy",
        help="one input per flag, in order (numpy .npy files)",
    )
    parser.add_argument(
        "--zeros",
        action="store_true",
        help="run on zero inputs of the shapes recorded in the .pt2 (instead of --input)",
    )
    parser.add_argument(
        "--save-dir", type=Path, help="write outputs there as out0.npy, out1.npy, ..."
    )
    parser.add_argument(
        "--repeat", type=_positive, metavar="N", help="also time N more runs (N >= 1)"
    )
    parser.add_argument(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="cpu, cuda or cuda:N (default auto: cuda for a blob built for CUDA, else cpu)",
    )
    parser.add_argument(
        "--graphs",
        action="store_true",
        help="CUDA only: replay each run as a CUDA graph (after an eager warm-up run)",
    )
    parser.add_argument(
        "--tf32",
        action="store_true",
        help="CUDA only: allow TF32 in cuDNN convolutions, torch's default math "
        "(default: true float32 everywhere)",
    )
    parser.add_argument(
        "--tf32-matmul",
        action="store_true",
        help="CUDA only: allow TF32 in float32 matmuls too, as "
        "torch.backends.cuda.matmul.allow_tf32=True (off in torch's default)",
    )
    parser.add_argument("--no-lint", action="store_true", help="skip the in-process linter")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _read_input(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ShimkitError(f"{path}: not a readable .npy file: {exc}") from None


def _bfloat16_where_expected(
    inputs: list[np.ndarray], specs: tuple[InputSpec, ...] | None
) -> list[np.ndarray]:
    """The inputs, with each 2-byte void array read where the package expects bfloat16 taken
    as bfloat16: numpy has no such type, so np.save writes an ml_dtypes bfloat16 array
    (as `--save-dir` writes one) as raw 2-byte values, and np.load reads them back so."""
    if not specs:
        return inputs
    from shimkit.runtime.capi import numpy_dtype

    # numpy_dtype only where such an input is met: it needs ml_dtypes, which is optional.
    expected = [spec.dtype for spec in specs] + [None] * len(inputs)
    return [
        x.view(numpy_dtype("bfloat16"))
        if dtype == "bfloat16" and x.dtype.kind == "V" and x.dtype.itemsize == 2
        else x
        for x, dtype in zip(inputs, expected[: len(inputs)], strict=True)
    ]


def _save_outputs(directory: Path, outputs: list[np.ndarray]) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShimkitError(
            f"{directory}: cannot create the output folder: {exc.strerror}"
        ) from None
    for i, out in enumerate(outputs):
        buffer = io.BytesIO()
        np.save(buffer, out, allow_pickle=False)
        write_atomically(directory / f"out{i}.npy", buffer.getvalue())


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from shimkit.runtime import blob_device, load
    from shimkit.runtime.capi import numpy_dtype

    device = blob_device(args.blob) if args.device == "auto" else args.device
    math = None
    if device.startswith("cuda"):
        from shimkit.runtime.cuda import cuda_runtime

        runtime = cuda_runtime()
        # Process-wide: this process runs one model.
        runtime.cudnn_tf32 = args.tf32
        runtime.matmul_tf32 = args.tf32_matmul
        math = runtime.math
    elif args.tf32 or args.tf32_matmul:
        flag = "--tf32" if args.tf32 else "--tf32-matmul"
        raise ShimkitError(f"{args.blob}: {flag} is for CUDA (this runs on {device})")
    model = load(args.blob, device=device, graphs=args.graphs, lint=not args.no_lint, config=config)
    with model:
        if args.zeros:
            specs = model.input_specs
            if specs is None or any(s.shape is None or None in s.shape for s in specs):
                raise ShimkitError(f"{args.blob}: no fixed input shapes recorded; use --input")
            inputs = [np.zeros(s.shape, numpy_dtype(s.dtype)) for s in specs]  # type: ignore[arg-type]
        else:
            inputs = [_read_input(p) for p in args.input]
            inputs = _bfloat16_where_expected(inputs, model.input_specs)
        outputs = model(*inputs)
        latency_us = None
        if args.repeat is not None:
            start = time.perf_counter()
            for _ in range(args.repeat):
                model(*inputs)
            latency_us = (time.perf_counter() - start) / args.repeat * 1e6
    if args.save_dir:
        _save_outputs(args.save_dir, outputs)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "blob": str(args.blob),
                    "device": model.device,
                    "math": math,
                    "outputs": [{"dtype": o.dtype.name, "shape": list(o.shape)} for o in outputs],
                    "latency_us": latency_us,
                },
                indent=2,
            )
        )
        return 0
    for i, out in enumerate(outputs):
        summary = ""
        if out.size and (out.dtype.kind in "fiub" or out.dtype.name == "bfloat16"):
            summary = f"  min {float(out.min()):.6g}  max {float(out.max()):.6g}"
        print(f"output {i}: {out.dtype.name} {list(out.shape)}{summary}")
    if latency_us is not None:
        print(f"latency: {latency_us:.2f} us/call over {args.repeat} calls")
    return 0
