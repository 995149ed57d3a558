"""Bzlmod (Bazel 7+) entry point of `torch_wheel_repository` (WORKSPACE calls the rule directly)."""

load(":torch_repository.bzl", "torch_wheel_repository")

def _torch_wheel_impl(_module_ctx):
    torch_wheel_repository(name = "torch_wheel")

torch_wheel = module_extension(
    implementation = _torch_wheel_impl,
    doc = "Declares @torch_wheel, the installed torch wheel for the runtime's _aten variants.",
)
