"""Finding the Python interpreter with shimkit's dependencies, for repository rules.

Shared by `shimkit_python_repository` (//rules/private:python_repo.bzl) and
`torch_wheel_repository` (//runtime:torch_repository.bzl). Machine-local by
design, like Bazel's local C++ toolchain.
"""

PYTHON_ENV = "SHIMKIT_PYTHON"

def find_python(rctx, who = ""):
    """The interpreter: `$SHIMKIT_PYTHON`, the workspace's `.venv/bin/python`, or `python3`.

    Args:
      rctx: the repository context (declare `environ = [PYTHON_ENV]`).
      who: text that starts a failure message ("" for none).

    Returns:
      The interpreter's path; fails when `$SHIMKIT_PYTHON` names a missing
      file or no interpreter is found.
    """
    explicit = rctx.os.environ.get(PYTHON_ENV, "")
    if explicit:
        path = rctx.path(explicit)
        if not path.exists:
            fail("%s%s=%s does not exist" % (who, PYTHON_ENV, explicit))
        return str(path)
    workspace = rctx.path(Label("@//:WORKSPACE")).dirname
    venv = workspace.get_child(".venv").get_child("bin").get_child("python")
    if venv.exists:
        return str(venv)
    found = rctx.which("python3")
    if found == None:
        fail("%sno Python found: set %s, run tools/bootstrap.sh, or install python3" % (who, PYTHON_ENV))
    return str(found)
