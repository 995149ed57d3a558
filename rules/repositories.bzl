"""WORKSPACE (Bazel 4.x-6.x) set-up of shimkit: `shimkit_config`.

```starlark
load("@shimkit//rules:repositories.bzl", "shimkit_config")

shimkit_config(prefix_file = "//:shim_symbol_prefix.bzl")
```

Bzlmod (Bazel 7+) does the same with the `shimkit` module extension
(//rules:extensions.bzl): `shimkit.config(prefix_file = ...)`.
"""

load("//rules/private:config_repo.bzl", "shimkit_config_repository")
load("//rules/private:python_repo.bzl", "shimkit_python_repository")

# shimkit's own prefix file: the default and the example.
DEFAULT_PREFIX_FILE = Label("//rules:shim_symbol_prefix.bzl")

def shimkit_config(prefix_file = None):
    """Declares the repositories shimkit's rules load: `@shimkit_config` and `@shimkit_python`.

    `@shimkit_config` holds a copy of `prefix_file`: every shimkit macro (the
    prefix define of shim libraries), shimkit's own shim targets and
    `shimkit_lint_test` (its `--config`) use that file. `@shimkit_python`
    locates the interpreter `shimkit_lint_test` runs the linter with
    (`$SHIMKIT_PYTHON`, the workspace's `.venv/bin/python`, or `python3`); an
    existing `shimkit_python` repository is kept.

    Args:
      prefix_file: label of the consumer's prefix file, with the same constants
        as shimkit's rules/shim_symbol_prefix.bzl (e.g.
        `"//:shim_symbol_prefix.bzl"`, resolved in the main repository).
        None: shimkit's own rules/shim_symbol_prefix.bzl.
    """
    shimkit_config_repository(
        name = "shimkit_config",
        prefix_file = prefix_file or DEFAULT_PREFIX_FILE,
    )
    if not native.existing_rule("shimkit_python"):
        shimkit_python_repository(name = "shimkit_python")
