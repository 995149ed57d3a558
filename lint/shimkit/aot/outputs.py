"""The shapes a compiled package hands its outputs back in, against the program's.

AOTInductor's C++ wrapper (the `*.wrapper.cpp` the package carries next to its blob) ends
its run function by handing each output over: `output_handles[i] = NAME.release();`,
NAME made by `reinterpret_tensor_wrapper(BUF, NDIM, int_array_A, ...)`, by
`aoti_torch_empty_strided(NDIM, int_array_A, ...)`, or taken over from another buffer
(`auto NAME = std::move(OTHER);  // reuse`). Those sizes are what every runner of the blob
returns, torch's own included. The reference is what the exported program gives when it
runs on its example inputs; the shapes torch.export recorded are not enough: on torch 2.11
with CUDA it records an LSTM's final cell state as [2, 1, 3, 32] where running the program
gives [2, 3, 32], and AOTInductor compiles what was recorded (docs/benchmarks.md). The
recorded shapes are the reference only where the program cannot run here (no example
inputs kept). `shimkit compile` reports each output whose rank or
constant sizes differ, by index with both shapes. Only what the wrapper states for certain
is compared: an output made another way, or sizes that are symbolic (dynamic shapes), are
compared by rank or not at all, never guessed.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import math
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
    recorded: bool = False  # torch.export recorded the compiled shape (its shape inference)

    def line(self, label: str) -> str:
        cause = (
            "torch.export recorded that shape and AOTInductor compiled it"
            if self.recorded
            else "the blob's (Inductor's) shape"
        )
        return (
            f"{label}: output {self.index} is handed back as [{', '.join(self.compiled)}] "
            f"where the exported program gives [{', '.join(self.exported)}]: {cause}; every "
            "runner of this package returns it, torch's too; reshape it to the exported one"
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


Shapes = list[tuple[Any, ...] | None]


def recorded_output_shapes(exported: Any) -> Shapes:
    """The sizes torch.export recorded for the program's user outputs (ints, or SymInts for
    dynamic dims), in order; None for an output that is not a tensor."""
    output = next(n for n in exported.graph.nodes if n.op == "output")
    values = list(output.args[0])
    count = len(exported.graph_signature.user_outputs)
    shapes: list[tuple[Any, ...] | None] = []
    for node in values[len(values) - count :]:
        value = getattr(node, "meta", {}).get("val")
        shapes.append(tuple(value.shape) if hasattr(value, "shape") else None)
    return shapes


def run_output_shapes(torch: Any, exported: Any) -> Shapes | None:
    """The sizes of the program's outputs when it runs on its example inputs, on copies of
    its buffers (a program that updates a buffer leaves the original as it was); None when
    it cannot run here: no example inputs kept (a loaded program), or the run fails
    (compile does not depend on it)."""
    example = getattr(exported, "example_inputs", None)
    if not example:
        return None
    args, kwargs = example
    try:
        module = exported.module()
        copies = {name: b.clone() for name, b in module.named_buffers()}
        with torch.no_grad():
            result = torch.func.functional_call(module, copies, tuple(args), dict(kwargs))
    except Exception:  # any failure: the recorded shapes are the reference instead
        return None
    leaves = result if isinstance(result, (tuple, list)) else [result]
    return [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in leaves]


def _listed(sizes: tuple[Any, ...]) -> str:
    return ", ".join(map(str, sizes))


def outputs_in_run_shapes(torch: Any, exported: Any) -> tuple[Any, list[str]]:
    """(`exported` with each output whose recorded shape differs from what the program gives
    when it runs reshaped to the latter, one line per output so reshaped). An output is
    reshaped where its recorded sizes are all constants, the run's differ, and the element
    counts agree (torch 2.11's LSTM on CUDA: c_n recorded as [2, 1, 3, 32], run as
    [2, 3, 32]); the reshape is a view, so every runner of the blob, torch's own
    included, hands back the run's shape. Programs that cannot run here stay as they are,
    and so do outputs with symbolic sizes (dynamic shapes: the run's sizes are one
    example's)."""
    recorded = recorded_output_shapes(exported)
    run = run_output_shapes(torch, exported)
    if run is None or len(run) != len(recorded):
        return exported, []
    fixes: dict[int, tuple[int, ...]] = {}
    for index, (was, got) in enumerate(zip(recorded, run, strict=True)):
        if was is None or got is None or not all(type(d) is int for d in was):
            continue
        if tuple(was) != tuple(got) and math.prod(was) == math.prod(got):
            fixes[index] = tuple(got)
    if not fixes:
        return exported, []
    graph = exported.graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    values = list(output.args[0])
    first_user = len(values) - len(exported.graph_signature.user_outputs)
    with graph.inserting_before(output):
        for index, shape in fixes.items():
            values[first_user + index] = graph.call_function(
                torch.ops.aten.reshape.default, (values[first_user + index], list(shape))
            )
    output.args = (tuple(values),)
    exported.graph_module.recompile()
    lines = [
        f"output {index} reshaped to [{_listed(shape)}], the shape the program gives when it "
        f"runs (torch.export recorded [{_listed(recorded[index] or ())}], which AOTInductor "
        "would compile)"
        for index, shape in fixes.items()
    ]
    # Traced again: the reshapes get their metadata (shapes) as exported nodes have.
    return exported.run_decompositions({}), lines


def _type_name(kind: type) -> str:
    module = kind.__module__
    return f"{module}.{kind.__qualname__}" if module.startswith("torch") else kind.__qualname__


def _plain_spec(pytree: Any, spec: Any) -> tuple[Any, list[str]]:
    """(`spec` with every named-tuple node a plain tuple, the names of the types replaced)."""
    if spec.is_leaf():
        return spec, []
    children, names = [], []
    # torch 2.13 deprecates the `children_specs` field that older torch has alone.
    kids = spec.children() if hasattr(spec, "children") else spec.children_specs
    for child in kids:
        plain, found = _plain_spec(pytree, child)
        children.append(plain)
        names.extend(found)
    kind = spec.type
    # pytree's node for a collections.namedtuple is the factory, its class the context;
    # torch.return_types (struct sequences) are tuple subclasses of their own.
    named = spec.context if kind is collections.namedtuple else kind
    if isinstance(named, type) and issubclass(named, tuple) and named is not tuple:
        return pytree.TreeSpec(tuple, None, children), [*names, _type_name(named)]
    return pytree.TreeSpec(kind, spec.context, children), names


def plain_output_tuples(torch: Any, exported: Any) -> tuple[Any, list[str]]:
    """(`exported` with its named-tuple outputs returned as plain tuples, one line saying
    so). A model may return a named tuple: its own (`collections.namedtuple`, `NamedTuple`)
    or the result of ops like topk, sort, max(dim) or svd as it is (`torch.return_types`).
    AOTInductor stores the output structure in the package and fails on such a type unless
    it was registered with pytree under a serialized name ("No registered serialization
    name", "Can't serialize TreeSpec of namedtuple class"). The values and their order
    are the same; torch's runner of the package hands back tuples where eager gives the
    named ones (the slim runtime returns a flat list either way). The copy shares the
    graph and weights with `exported`, which is left as it was."""
    pytree = torch.utils._pytree
    entries = exported._module_call_graph
    if not entries or entries[0].signature is None:
        return exported, []
    signature = entries[0].signature
    out_spec, names = _plain_spec(pytree, signature.out_spec)
    if not names:
        return exported, []
    plain = copy.copy(exported)
    signature = dataclasses.replace(signature, out_spec=out_spec)
    plain._module_call_graph = [dataclasses.replace(entries[0], signature=signature), *entries[1:]]
    kinds = ", ".join(sorted(set(names)))
    return plain, [
        f"outputs of named-tuple type {kinds} are handed back as plain tuples (same values, "
        "same order): AOTInductor cannot package unregistered named tuples"
    ]


def disagreements(
    source: str, exported: Shapes, recorded: Shapes | None = None
) -> list[ShapeDisagreement]:
    """The outputs whose rank, or a constant size, differs between the wrapper `source` and
    the program's shapes `exported`; `recorded` (torch.export's) says whether the compiled
    shape is the one torch.export recorded."""
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
            noted = recorded[index] if recorded is not None and index < len(recorded) else None
            found.append(
                ShapeDisagreement(
                    index,
                    tuple(compiled),
                    tuple(str(d) for d in want),
                    recorded=noted is not None and sizes is not None and tuple(noted) == sizes,
                )
            )
    return found
