"""Bzlmod (Bazel 7+) entry point of `shimkit_python_repository`.

WORKSPACE (Bazel 4.x) calls the repository rule directly; MODULE.bazel uses
this extension: `use_extension("//rules/private:python_extension.bzl",
"shimkit_python")` and `use_repo(..., "shimkit_python")`.
"""

load(":python_repo.bzl", "shimkit_python_repository")

def _shimkit_python_impl(_module_ctx):
    shimkit_python_repository(name = "shimkit_python")

shimkit_python = module_extension(
    implementation = _shimkit_python_impl,
    doc = "Declares @shimkit_python, the interpreter shimkit_lint_test runs the linter with.",
)
