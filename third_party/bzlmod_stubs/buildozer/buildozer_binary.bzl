"""Stand-in for @buildozer//:buildozer_binary.bzl (used only by `bazel mod tidy`)."""

def _buildozer_binary_repo_impl(rctx):
    rctx.file("BUILD.bazel", "# buildozer is not available offline; `bazel mod tidy` is unsupported.\n")

_buildozer_binary_repo = repository_rule(implementation = _buildozer_binary_repo_impl)

def _buildozer_binary_impl(_mctx):
    _buildozer_binary_repo(name = "buildozer_binary")

buildozer_binary = module_extension(implementation = _buildozer_binary_impl)
