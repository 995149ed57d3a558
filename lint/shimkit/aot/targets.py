"""Compile targets: the runtime a blob is compiled for, and the shims that runtime defines.

`shimkit compile --target T` checks every blob against T's shim names before
it writes the package (the linter's SK004 with those names as the provider),
so the package loads on T, or compile names each missing shim and the fix.

- slim-cpu: shimkit's slim CPU shims (`shimkit run`, `shimkit.runtime.load`);
  the names are the exports of the built CPU shim library.
- slim-cuda: the slim CUDA shims; the exports of the CUDA shim library (built
  without a GPU).
- libtorch: torch's own runner through the forwarding library
  (`shimkit.aot.forward`): every header shim that torch's libraries export,
  prefixed. libtorch has the proxy executor, so SK009 does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from shimkit.config import ShimConfig
from shimkit.elf import read_elf_names
from shimkit.errors import ShimkitError


@dataclass(frozen=True)
class Target:
    name: str
    runtime: str  # what loads the blob, for messages
    fix: str  # how a missing shim is got, for messages
    has_proxy_executor: bool


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "slim-cpu",
            "the slim CPU shims",
            "implement it in shims/ (the slim CPU shims), or compile with --target libtorch "
            "to run under torch's runner",
            has_proxy_executor=False,
        ),
        Target(
            "slim-cuda",
            "the slim CUDA shims",
            "implement it in shims/cuda/ (the slim CUDA shims), or compile with --target "
            "libtorch to run under torch's runner",
            has_proxy_executor=False,
        ),
        Target(
            "libtorch",
            "torch's runner through the forwarding library",
            "this torch does not export it: use a torch that does, or another op",
            has_proxy_executor=True,
        ),
    )
}
DEFAULT_TARGET = "slim-cpu"


def target_named(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ShimkitError(
            f"unknown compile target {name!r} (one of: {', '.join(TARGETS)})"
        ) from None


def _exports(path: str) -> list[str]:
    with open(path, "rb") as handle:
        return read_elf_names(handle.read(), path).exports


def provided_names(target: Target, config: ShimConfig) -> frozenset[str]:
    """The prefixed shim names the target's runtime defines."""
    if target.name == "libtorch":
        from shimkit.checks.reference import default_reference_paths
        from shimkit.header import find_torch, shim_names

        forwarded = set(shim_names(find_torch().include_dir))
        exported: set[str] = set()
        for library in default_reference_paths():
            exported.update(_exports(str(library)))
        return frozenset(config.prefixed(n) for n in forwarded & exported)
    if target.name == "slim-cuda":
        from shimkit.runtime.cuda import cuda_shim_library

        library = cuda_shim_library()
    else:
        from shimkit.runtime.capi import shim_library

        library = shim_library(config)
    exports = _exports(str(library))
    provided = frozenset(n for n in exports if config.is_prefixed_family(n))
    if not provided:
        # Libraries built for another prefix (a wheel's serve shimkit's default): name it,
        # rather than call every shim the blob imports missing.
        from shimkit.runtime.admit import how_to_serve, shim_prefixes

        other = next(iter(shim_prefixes(exports, config.families)), config.prefix)
        if other != config.prefix:
            raise ShimkitError(
                f"{library}: {target.runtime} here serve prefix {other}, not {config.prefix} "
                f"({config.source}): {how_to_serve(config.prefix)}, or compile with --target "
                "libtorch to run under torch's runner"
            )
    return provided
