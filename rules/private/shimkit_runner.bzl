"""The test executable that runs the `shimkit` CLI from the runfiles.

Shared by `shimkit_lint_test` (//rules:lint_test.bzl) and `shimkit_generated_file_test`
(//rules:generated_file_test.bzl): a shell script that runs //rules/private:lint_runner.py
with the interpreter of `shimkit_python_repository` and the shimkit sources as runfiles
(declared inputs, relative paths), passing when shimkit exits with the expected code.
"""

# The private attributes `shimkit_test_executable` reads.
_RUNNER_ATTRS = {
    "_runner": attr.label(
        default = Label("//rules/private:lint_runner.py"),
        allow_single_file = True,
    ),
    "_python": attr.label(
        default = Label("@shimkit_python//:python.sh"),
        allow_single_file = True,
    ),
    "_shimkit_srcs": attr.label(
        default = Label("//lint:shimkit_srcs"),
    ),
}

def with_runner_attrs(attrs):
    """A rule's attributes plus the private ones `shimkit_test_executable` reads.

    Args:
      attrs: the rule's own attribute dict.

    Returns:
      A new dict with both.
    """
    merged = dict(attrs)
    merged.update(_RUNNER_ATTRS)
    return merged

def _quote(arg):
    return "'" + arg.replace("'", "'\\''") + "'"

def shimkit_test_executable(ctx, shimkit_args, expect_exit, inputs):
    """The DefaultInfo of a test running `shimkit SHIMKIT_ARGS`.

    Args:
      ctx: the rule context (its attributes come from `with_runner_attrs`).
      shimkit_args: the shimkit command line (paths as runfiles short paths).
      expect_exit: the exit code that makes the test pass.
      inputs: the files the command reads (added to the runfiles).

    Returns:
      A DefaultInfo with the test script and its runfiles.
    """
    python = ctx.file._python
    runner = ctx.file._runner
    command = [python.short_path, runner.short_path, "--expect-exit", str(expect_exit), "--"]
    script = ctx.actions.declare_file(ctx.label.name + ".shimkit_test.sh")
    ctx.actions.write(
        output = script,
        content = "#!/bin/sh\n# Generated for %s.\nexec %s\n" % (
            ctx.label.name,
            " ".join([_quote(a) for a in command + shimkit_args]),
        ),
        is_executable = True,
    )
    runfiles = ctx.runfiles(files = [python, runner] + inputs + ctx.files._shimkit_srcs)
    return DefaultInfo(executable = script, runfiles = runfiles)
