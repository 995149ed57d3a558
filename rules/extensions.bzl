"""Bzlmod (Bazel 7+) set-up of shimkit: the `shimkit` module extension.

In the consumer's MODULE.bazel:

```starlark
bazel_dep(name = "shimkit", version = "0.1.0")

shimkit = use_extension("@shimkit//rules:extensions.bzl", "shimkit")
shimkit.config(prefix_file = "//:shim_symbol_prefix.bzl")
```

The extension declares `@shimkit_config` (a copy of the chosen prefix file, which
every shimkit macro, shimkit's shim targets and `shimkit_lint_test` load) and
`@shimkit_python` (the interpreter of `shimkit_lint_test`). The root module's
`config` wins; without one, a single non-root module's `config` is used (two
different ones fail); without any, shimkit's own rules/shim_symbol_prefix.bzl.
WORKSPACE does the same with `shimkit_config` (//rules:repositories.bzl).
"""

load("//rules/private:config_repo.bzl", "PREFIX_FILE_ATTRS", "shimkit_config_repository")
load("//rules/private:python_repo.bzl", "shimkit_python_repository")
load(":repositories.bzl", "DEFAULT_PREFIX_FILE")

def _where(module):
    return "root module" if module.is_root else "module %s@%s" % (module.name, module.version)

def _chosen_prefix_file(module_ctx):
    """The prefix file label the modules ask for (see the module docstring)."""
    requests = []  # (module description, label)
    for module in module_ctx.modules:
        tags = module.tags.config
        if len(tags) > 1:
            fail("shimkit.config: %s calls shimkit.config %d times; call it once" % (_where(module), len(tags)))
        if tags and module.is_root:
            return tags[0].prefix_file
        if tags:
            requests.append((_where(module), tags[0].prefix_file))
    distinct = {str(label): label for _, label in requests}
    if len(distinct) > 1:
        fail("shimkit.config: modules ask for different prefix files (%s); set one in the root module" %
             ", ".join(["%s: %s" % (who, label) for who, label in requests]))
    if distinct:
        return distinct.values()[0]
    return DEFAULT_PREFIX_FILE

def _shimkit_impl(module_ctx):
    shimkit_config_repository(name = "shimkit_config", prefix_file = _chosen_prefix_file(module_ctx))
    shimkit_python_repository(name = "shimkit_python")

_config = tag_class(
    attrs = PREFIX_FILE_ATTRS,
    doc = "Makes `prefix_file` the prefix file of every shimkit macro and lint test.",
)

shimkit = module_extension(
    implementation = _shimkit_impl,
    tag_classes = {"config": _config},
    doc = "Declares @shimkit_config (the consumer's prefix file) and @shimkit_python (the lint interpreter).",
)
