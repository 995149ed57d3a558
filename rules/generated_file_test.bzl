"""`shimkit_generated_file_test`: a checked-in generated file is what `shimkit` generates now.

Runs `shimkit --config <prefix file> ARGS --check --output <src>` with the shimkit
sources from the runfiles (like `shimkit_lint_test`), so `bazel test` fails
when someone edits the prefix file and forgets to regenerate. Hermetic: the prefix
file, the checked-in file and the shimkit sources are declared inputs, referenced by
relative paths.
"""

load("//rules/private:shimkit_runner.bzl", "shimkit_test_executable", "with_runner_attrs")

def _shimkit_generated_file_test_impl(ctx):
    args = ["--config", ctx.file.prefix_file.short_path] + ctx.attr.generator
    args += ["--check", "--output", ctx.file.src.short_path]
    inputs = [ctx.file.prefix_file, ctx.file.src]
    return [shimkit_test_executable(ctx, args, ctx.attr.expect_exit, inputs)]

shimkit_generated_file_test = rule(
    implementation = _shimkit_generated_file_test_impl,
    test = True,
    doc = """Checks a checked-in generated file against `shimkit <generator> --check`.

Passes when the file is what the generator writes now from `prefix_file`
(`expect_exit = 0`); a negative control sets `expect_exit = 4` (out of date).
""",
    attrs = with_runner_attrs({
        "src": attr.label(
            allow_single_file = True,
            mandatory = True,
            doc = "The checked-in generated file.",
        ),
        "generator": attr.string_list(
            mandatory = True,
            doc = "The shimkit command that generates it, e.g. `[\"header\", \"--families\"]`.",
        ),
        "prefix_file": attr.label(
            default = Label("//rules:shim_symbol_prefix.bzl"),
            allow_single_file = True,
            doc = "The prefix file it is generated from.",
        ),
        "expect_exit": attr.int(
            default = 0,
            doc = "0: the file is up to date; 4 for a negative control (a stale copy).",
        ),
    }),
)
