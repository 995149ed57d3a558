"""The package layout is the architecture: no import cycles, and each group of
`shimkit` imports only the groups below it (README.md, "Where things live").

The graph is read with `ast` from lint/shimkit, never by importing it. What counts as an
import of module A by module B:
- every `import` / `from ... import` in B: at module level, under `if TYPE_CHECKING:`, and
  inside functions. A deferred (function-level) import only hides a cycle from the
  interpreter at import time; the two modules still need each other, so it counts;
- `importlib.import_module("shimkit.x.y")`, and with an f-string whose constant head names
  a package (`f"shimkit.commands.{name}"`) every module directly in that package (the CLI
  loads its subcommands so);
- `from pkg import name` is an import of `pkg.name` when that is a module, else of `pkg`.
Not counted: Python running `pkg/__init__.py` before `pkg.mod`. A package that re-exports
its submodules would otherwise always look cyclic; a real cycle through an `__init__`
(a submodule importing a name its package re-exports from a sibling) is still caught,
because that import names the package. Compiled extension modules (`_symnames.c`) are
leaves.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "lint" / "shimkit"

# Group -> the groups its modules may import. A group is a subpackage of shimkit
# (elf, inputs, checks, ...) or one top-level module (config, errors, ...); "shimkit"
# is the package's own __init__ (version, docs URL). Read from the bottom up:
#   foundation  errors exitcodes escape staging native progress shimkit; config fileio cache
#   elf         reads ELF bytes: nothing of shimkit (standard library only)
#   header      the shim name list and generated headers
#   inputs      finds ELF images in files, trees, archives and containers
#   checks      the rules; the collision rule's reference sets. Never runtime, aot, gate,
#               report or commands: the runtime and compile call the linter, not the reverse
#   gate        baselines and suppressions over lint results
#   report      renders lint and gate results; only commands import it
#   runtime     loads and runs blobs (lints them first); never aot
#   aot         compile, rewrite, forward; may ask the runtime which shims a target has
#   commands    one module per subcommand; only cli imports them
ALLOWED: dict[str, frozenset[str]] = {
    name: frozenset(deps.split())
    for name, deps in {
        "errors": "",
        "exitcodes": "",
        "escape": "",
        "staging": "",
        "native": "",
        "progress": "",
        "shimkit": "",
        "config": "errors native",
        "fileio": "errors staging",
        "cache": "errors fileio",
        "elf": "",
        "header": "errors",
        "inputs": "elf staging",
        "checks": "elf inputs config errors exitcodes native cache fileio",
        "gate": "checks config errors escape",
        "report": "checks gate config escape exitcodes shimkit",
        "runtime": "elf inputs checks config errors fileio native",
        "aot": "elf inputs checks header runtime config errors fileio cache progress",
        "commands": "aot checks config elf errors escape exitcodes fileio gate header inputs "
        "native progress report runtime shimkit",
        "cli": "commands errors escape exitcodes shimkit",
        "__main__": "cli",
    }.items()
}


def package_modules(package_dir: Path, package: str) -> dict[str, Path | None]:
    """Module name -> source file (None for a compiled extension module)."""
    modules: dict[str, Path | None] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    for path in sorted(package_dir.rglob("*.c")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        modules.setdefault(".".join(parts), None)
    return modules


def _known(name: str, modules: Mapping[str, object]) -> str | None:
    """`name` or its longest prefix that is a module of the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(
    node: ast.AST, module: str, is_package: bool, modules: Mapping[str, object]
) -> Iterable[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            found = _known(alias.name, modules)
            if found:
                yield found
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".")[: None if is_package else -1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            found = _known(f"{base}.{alias.name}", modules)
            if found == f"{base}.{alias.name}" or (found := _known(base, modules)) is not None:
                yield found
    elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
        arg = node.args[0] if node.args else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found = _known(arg.value, modules)
            if found:
                yield found
        elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
            head = str(arg.values[0].value)
            if head.endswith(".") and head[:-1] in modules:
                yield from (m for m in modules if m.rpartition(".")[0] == head[:-1])


def import_graph(package_dir: Path, package: str = "shimkit") -> dict[str, set[str]]:
    """Module -> the package's modules it imports (see the module docstring)."""
    modules = package_modules(package_dir, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            for target in _imported(node, name, path.name == "__init__.py", modules):
                if target != name:
                    graph[name].add(target)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def readme_order(readme: str) -> list[str]:
    """The groups in the order of README.md's package table (first cell of each row)."""
    table = readme.split("The package `shimkit`, one row per group", 1)[1].split("\n\n")[1]
    order: list[str] = []
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        order += [name.strip("/") for name in first_cell.split("`")[1::2]]
    return order


def order_violations(order: list[str], allowed: Mapping[str, frozenset[str]]) -> list[str]:
    """One line per group that may import a group listed after it (or not listed)."""
    position = {group: i for i, group in enumerate(order)}
    return [
        f"{group} may import {dep}, listed after it"
        for group in order
        for dep in sorted(allowed.get(group, ()))
        if position.get(dep, len(order)) >= position[group]
    ]


def group_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(
    graph: Mapping[str, Iterable[str]], allowed: Mapping[str, frozenset[str]]
) -> list[str]:
    """One line per import of a group its importer may not use, and per module in a
    group that has no row in `allowed` (a new group is placed deliberately)."""
    problems: list[str] = []
    for module in sorted(graph):
        group = group_of(module)
        if group not in allowed:
            problems.append(f"{module}: group {group!r} has no row in ALLOWED")
            continue
        for target in sorted(graph[module]):
            other = group_of(target)
            if other != group and other not in allowed[group]:
                problems.append(f"{module} imports {target}: {group} may not import {other}")
    return problems


def _write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "shimkit" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "shimkit"


def test_shimkit_has_no_import_cycles() -> None:
    assert find_cycles(import_graph(PACKAGE_DIR)) == []


def test_graph_sees_deferred_dynamic_and_extension_imports() -> None:
    """The real graph holds the kinds of edges the checks rely on (an empty or
    top-level-only graph would pass them vacuously)."""
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 80
    assert "shimkit.runtime.cuda" in graph["shimkit.aot.targets"]  # inside a function
    assert "shimkit.commands.lint_cmd" in graph["shimkit.cli"]  # importlib.import_module
    assert "shimkit.elf._symnames" in graph["shimkit.elf.symtab"]  # compiled extension
    assert "shimkit.elf" not in graph["shimkit.elf.symtab"]  # ... not its package


def test_cycle_finder_reports_a_cycle() -> None:
    """Negative control: a synthetic graph with a cycle (and a node hanging off it)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_a_deferred_import_cycle_is_reported(tmp_path: Path) -> None:
    """Negative control through the graph builder: two modules of a synthetic package
    that need each other, one through a function-level relative import, one under
    TYPE_CHECKING, and a package whose __init__ re-exports a sibling a submodule uses."""
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "runtime/__init__.py": "from shimkit.runtime.model import load\n",
            "runtime/model.py": "def load():\n    from .cuda import CudaModel\n",
            "runtime/cuda.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from shimkit.runtime.model import load\n"
            ),
            "elf/__init__.py": "from shimkit.elf.reader import read\n",
            "elf/reader.py": "from shimkit.elf.symtab import names\ndef read(): ...\n",
            "elf/symtab.py": "from shimkit.elf import read\n",
        },
    )
    assert find_cycles(import_graph(package)) == [
        ["shimkit.elf", "shimkit.elf.reader", "shimkit.elf.symtab"],
        ["shimkit.runtime.cuda", "shimkit.runtime.model"],
    ]


def test_groups_import_only_what_they_may() -> None:
    assert layer_violations(import_graph(PACKAGE_DIR), ALLOWED) == []


def test_layer_check_reports_a_forbidden_import(tmp_path: Path) -> None:
    """Negative control: the linter's rules reaching into the runtime (deferred), the
    ELF reader using the config, and a module in a group without a row."""
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "config.py": "",
            "checks/__init__.py": "",
            "checks/rules.py": "def f():\n    from shimkit.runtime import model\n",
            "runtime/__init__.py": "",
            "runtime/model.py": "from shimkit.checks import rules\n",
            "elf/__init__.py": "from shimkit import config\n",
            "plugins/x.py": "",
        },
    )
    assert layer_violations(import_graph(package), ALLOWED) == [
        "shimkit.checks.rules imports shimkit.runtime.model: checks may not import runtime",
        "shimkit.elf imports shimkit.config: elf may not import config",
        "shimkit.plugins.x: group 'plugins' has no row in ALLOWED",
    ]


def test_allowed_table_is_layered_and_complete() -> None:
    """The table itself has no cycle between groups, names only groups that exist, and
    every group of the package has a row."""
    assert find_cycles(ALLOWED) == []
    groups = {group_of(m) for m in package_modules(PACKAGE_DIR, "shimkit")}
    assert set(ALLOWED) == groups
    assert set().union(*ALLOWED.values()) <= groups
    assert {g for g, deps in ALLOWED.items() if "report" in deps} == {"commands"}


def test_readme_lists_the_groups_bottom_up() -> None:
    """README.md's "Where things live" names every group once, each after all the groups
    it may import. Negative control: the same list reversed."""
    order = readme_order((ROOT / "README.md").read_text(encoding="utf-8"))
    assert sorted(order) == sorted(ALLOWED)
    assert order_violations(order, ALLOWED) == []
    assert "cli may import commands, listed after it" in order_violations(order[::-1], ALLOWED)
