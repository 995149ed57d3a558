"""The shapes a compiled package hands its outputs back in, against the exported program's.

AOTInductor's C++ wrapper (the `*.wrapper.cpp` the package carries next to its blob) ends
its run function by handing each output over: `output_handles[i] = NAME.release();`,
NAME made by `reinterpret_tensor_wrapper(BUF, NDIM, int_array_A, ...)`, by
`aoti_torch_empty_strided(NDIM, int_array_A, ...)`, or taken over from another buffer
(`auto NAME = std::move(OTHER);  // reuse`). Those sizes are what every runner of the blob
returns, torch's own included. They should be the exported program's (eager's); torch
2.11's CUDA wrapper for an LSTM hands its final cell state back as [2, 1, 3, 32] for
[2, 3, 32] (docs/benchmarks.md). `shimkit compile` reads the wrapper and reports each
output whose rank or constant sizes differ, by index with both shapes. It only reports
what it can read for certain: an output made another way, or sizes that are symbolic
(dynamic shapes), are compared by rank or not at all, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RUN_START = "::run_impl("
RUN_END = "} // AOTInductorModel::run_impl"
INT_ARRAY = re.compile(r"static constexpr int64_t (int_array_\d+)\[\] = \{([^}]*)\};")
VIEW = re.compile(
    r"auto (\w+) = wrap_with_raii_handle_if_needed\(reinterpret_tensor_wrapper\("
    r"\w+, (\d+), (int_array_\d+),"
)
EMPTY = re.compile(r"aoti_torch_empty_strided\((\d+), (int_array_\d+), [^;]*&(\w+)_handle\)\);")
REUSE = re.compile(r"auto (\w+) = std::move\((\w+)\);\s*// reuse")
OUTPUT = re.compile(r"output_handles\[(\d+)\] = (\w+)\.release\(\);")
LITERAL = re.compile(r"-?\d+L?")


@dataclass(frozen=True)
class ShapeDisagreement:
    index: int  # the output's position
    compiled: tuple[str, ...]  # the wrapper's sizes ("?" where not a constant)
    exported: tuple[str, ...]  # the exported program's

    def line(self, label: str) -> str:
        return (
            f"{label}: output {self.index} is handed back as [{', '.join(self.compiled)}] "
            f"where the exported program gives [{', '.join(self.exported)}]: the blob's "
            "(Inductor's) shape, which every runner of this package returns, torch's too; "
            "reshape it to the exported one"
        )


Geometry = tuple[int, tuple[int | None, ...] | None]  # rank, constant sizes (None: unknown)


def _arrays(body: str) -> dict[str, tuple[int | None, ...]]:
    arrays = {}
    for name, items in INT_ARRAY.findall(body):
        values = [v.strip() for v in items.split(",") if v.strip()]
        arrays[name] = tuple(int(v.rstrip("L")) if LITERAL.fullmatch(v) else None for v in values)
    return arrays


def wrapper_output_shapes(source: str) -> dict[int, Geometry]:
    """Output index -> (rank, sizes) for the outputs of the wrapper's run function that are
    made one of the ways the module docstring names; other outputs are left out."""
    start, end = source.find(RUN_START), source.find(RUN_END)
    if start < 0 or end < start:
        return {}
    body = source[start:end]
    arrays = _arrays(body)
    made: dict[str, tuple[int, str]] = {}
    for name, rank, array in VIEW.findall(body):
        made[name] = (int(rank), array)
    for rank, array, name in EMPTY.findall(body):
        made.setdefault(name, (int(rank), array))
    moved = dict(REUSE.findall(body))
    shapes: dict[int, Geometry] = {}
    for index, name in OUTPUT.findall(body):
        for _ in range(len(moved) + 1):  # follow reuse moves to the buffer's making
            if name in made or name not in moved:
                break
            name = moved[name]
        if name in made:
            rank, array = made[name]
            sizes = arrays.get(array)
            shapes[int(index)] = (rank, sizes if sizes is not None and len(sizes) == rank else None)
    return shapes


def exported_output_shapes(exported: Any) -> list[tuple[Any, ...] | None]:
    """The exported program's user outputs' sizes (ints, or SymInts for dynamic dims), in
    order; None for an output that is not a tensor."""
    output = next(n for n in exported.graph.nodes if n.op == "output")
    values = list(output.args[0])
    count = len(exported.graph_signature.user_outputs)
    shapes: list[tuple[Any, ...] | None] = []
    for node in values[len(values) - count :]:
        value = getattr(node, "meta", {}).get("val")
        shapes.append(tuple(value.shape) if hasattr(value, "shape") else None)
    return shapes


def disagreements(source: str, exported: list[tuple[Any, ...] | None]) -> list[ShapeDisagreement]:
    """The outputs whose rank, or a constant size, differs between the wrapper `source` and
    the exported shapes (`exported_output_shapes`)."""
    found = []
    for index, (rank, sizes) in sorted(wrapper_output_shapes(source).items()):
        if index >= len(exported) or exported[index] is None:
            continue
        want = exported[index]
        assert want is not None
        static = [d if isinstance(d, int) else None for d in want]
        differ = rank != len(want) or (
            sizes is not None
            and any(
                a is not None and b is not None and a != b
                for a, b in zip(sizes, static, strict=True)
            )
        )
        if differ:
            compiled = [str(s) if s is not None else "?" for s in sizes] if sizes else ["?"] * rank
            found.append(ShapeDisagreement(index, tuple(compiled), tuple(str(d) for d in want)))
    return found
