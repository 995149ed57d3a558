"""Which of a blob's constants its own code reads only through shim calls.

When AOTInductor's model makes its constants it caches each one's data address
(`ConstantHandle`, aoti_runtime/utils.h), and the generated code hands that address to
its kernels (`(const float*)(NAME.data_ptr())`) without asking the shims. Such a
constant's bytes must stay where they are. A constant the wrapper only passes to shim
calls (`aoti_torch_cpu_convolution(buf0, NAME, ...)`, `NAME.get()`) is read through the
shims alone, so a shim's copy in another layout may stand in for it: the runtime's
convolution keeps its weights packed for oneDNN and gives the plain pages back to the
system (docs/runtime.md, "Memory"; `shimkit_model_allow_stand_ins`).

The wrapper source (`X.wrapper.cpp`, which AOTInductor packs next to `X.wrapper.so`)
decides it. Every use of the constant's variable must be one of the forms above;
anything else (a kernel argument, a copy, an unknown helper, a `constants_->at(...)`
outside a declaration) keeps the constant's bytes, and a wrapper this cannot follow
keeps them all. A blob without its wrapper source (a bare `.so`) lets nothing stand in.
"""

from __future__ import annotations

import re

# `auto& NAME = constants_->at(N);`, how run_impl and _const_run_impl bind constants.
_DECLARATION = re.compile(r"auto& (\w+) = constants_->at\((\d+)\);")
_CONSTANTS_AT = re.compile(r"constants_->at\(")
_INFO = re.compile(r"constants_info_\[(\d+)\]\.(name|original_fqn|from_folded) = ([^;]*);")
_STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"$')
_SHIM_CALL = re.compile(r"aoti_torch_\w+")


def _innermost_callee(source: str, at: int) -> str | None:
    """The function whose argument list encloses position `at`, if any."""
    depth = 0
    for i in range(at - 1, -1, -1):
        char = source[i]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                end = i
                while end > 0 and source[end - 1].isspace():
                    end -= 1
                begin = end
                while begin > 0 and (source[begin - 1].isalnum() or source[begin - 1] == "_"):
                    begin -= 1
                return source[begin:end] or None
            depth -= 1
        elif char == ";":
            return None
    return None


def _next_char(source: str, at: int, step: int) -> str:
    """The first non-blank character from `at` on (step 1) or before `at` (step -1)."""
    i = at if step > 0 else at - 1
    while 0 <= i < len(source) and source[i].isspace():
        i += step
    return source[i] if 0 <= i < len(source) else ""


def _passed_to_shims(source: str, start: int, end: int) -> bool:
    """True when the use of a constant's variable at [start, end) hands the shims its
    handle (or is its name as a string)."""
    before = _next_char(source, start, -1)
    if before == '"' and source[end : end + 1] == '"':
        return True  # the name as a string (constants_info_[i].name)
    if source.startswith(".get()", end):
        return True  # the AtenTensorHandle: its bytes reached through the shims
    if before not in ("(", ",") or _next_char(source, end, 1) not in (",", ")"):
        return False
    callee = _innermost_callee(source, start)
    return callee is not None and _SHIM_CALL.fullmatch(callee) is not None


def stand_in_constants(source: str) -> tuple[str, ...]:
    """The original FQNs of the constants in wrapper `source` that the blob's code reads
    only through shim calls (the ones the container lists, not folded ones), sorted."""
    declarations = list(_DECLARATION.finditer(source))
    if len(declarations) != len(_CONSTANTS_AT.findall(source)):
        return ()  # constants reached some other way: keep every plain copy
    info: dict[int, dict[str, str]] = {}
    for match in _INFO.finditer(source):
        info.setdefault(int(match.group(1)), {})[match.group(2)] = match.group(3).strip()
    positions: dict[str, set[int]] = {}
    indices: dict[str, set[int]] = {}
    for match in declarations:
        positions.setdefault(match.group(1), set()).add(match.start(1))
        indices.setdefault(match.group(1), set()).add(int(match.group(2)))
    if not positions:
        return ()
    # One pass over every use of every constant variable.
    uses = re.compile(r"\b(" + "|".join(map(re.escape, positions)) + r")\b")
    direct: set[str] = set()
    for use in uses.finditer(source):
        name = use.group(1)
        if use.start() not in positions[name] and not _passed_to_shims(source, *use.span()):
            direct.add(name)
    fqns = []
    for name in positions.keys() - direct:
        if len(indices[name]) != 1:
            continue  # one name bound to two constants: not followed
        fields = info.get(next(iter(indices[name])), {})
        declared = _STRING.match(fields.get("name", ""))
        fqn = _STRING.match(fields.get("original_fqn", ""))
        if declared is None or declared.group(1) != name or fqn is None:
            continue
        if fields.get("from_folded") == "false":
            fqns.append(fqn.group(1))
    return tuple(sorted(fqns))
