"""`shimkit_lint_test`: lint the outputs of built targets inside `bazel test`.

The test runs `shimkit lint` on every file the `srcs` targets output,
configured from //rules:shim_symbol_prefix.bzl (passed as a declared input
with `--config`). Hermetic: the shimkit sources, the prefix file, the linted
files and the providers are all runfiles, referenced by relative paths; no
reference library is read unless given in `references`.

The interpreter comes from the `shimkit_python_repository` rule (re-exported
here for WORKSPACE): $SHIMKIT_PYTHON, else the workspace's .venv, else python3.
"""

load("//rules/private:python_repo.bzl", _shimkit_python_repository = "shimkit_python_repository")
load("//rules/private:shimkit_runner.bzl", "shimkit_test_executable", "with_runner_attrs")

shimkit_python_repository = _shimkit_python_repository

def _short_paths(files):
    return [f.short_path for f in files]

def _files_of(targets):
    return depset(transitive = [t[DefaultInfo].files for t in targets]).to_list()

def _shimkit_lint_test_impl(ctx):
    srcs = _files_of(ctx.attr.srcs)
    if not srcs:
        fail("srcs of %s output no files to lint" % ctx.label)
    providers = _files_of(ctx.attr.providers)
    references = _files_of(ctx.attr.references)
    args = ["--config", ctx.file._prefix_file.short_path, "lint", "--no-color"]
    args += ["--format", "text"]
    if references:
        for f in references:
            args += ["--reference", f.short_path]
    else:
        args.append("--no-reference")
    for f in providers:
        args += ["--provider", f.short_path]
    if ctx.attr.blob:
        args.append("--blob")
    for pattern in ctx.attr.own:
        args += ["--own", pattern]
    args += _short_paths(srcs)

    inputs = [ctx.file._prefix_file] + srcs + providers + references
    return [shimkit_test_executable(ctx, args, ctx.attr.expect_exit, inputs)]

shimkit_lint_test = rule(
    implementation = _shimkit_lint_test_impl,
    test = True,
    doc = """Lints the files output by `srcs` with `shimkit lint`.

Passes when shimkit's exit code equals `expect_exit` (0: clean). A negative
control sets `expect_exit` to the bits it must produce, e.g. 8 for an
unprefixed shim symbol (see docs/cli.md for the bits).
""",
    attrs = with_runner_attrs({
        "srcs": attr.label_list(
            allow_files = True,
            mandatory = True,
            doc = "Targets whose output files (shared objects, blobs, .pt2, archives) are linted.",
        ),
        "blob": attr.bool(
            default = False,
            doc = "Treat every linted file as an AOTInductor blob (`--blob`).",
        ),
        "providers": attr.label_list(
            allow_files = True,
            doc = "Libraries that define prefixed shims (`--provider`), for the SK004 closure.",
        ),
        "references": attr.label_list(
            allow_files = True,
            doc = "Reference libraries for the collision rule; none means `--no-reference`.",
        ),
        "own": attr.string_list(
            doc = "fnmatch patterns of our own libraries (`--own`); default: every non-blob.",
        ),
        "expect_exit": attr.int(
            default = 0,
            doc = "The exit code the lint must produce for the test to pass.",
        ),
        "_prefix_file": attr.label(
            default = Label("//rules:shim_symbol_prefix.bzl"),
            allow_single_file = True,
        ),
    }),
)
