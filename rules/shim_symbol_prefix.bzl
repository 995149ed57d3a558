"""Single source of truth for shimkit's private shim ABI.

Every consumer reads this file: the Bazel macros `load` it, the Python package
`shimkit` evaluates it (`shimkit config`), and generated headers are produced
from it. Change the prefix here and nowhere else.
"""

# The prefix prepended to every shim-family symbol of the slim shim ABI.
# Must be a valid start of a C identifier (letters, digits, underscores; no
# leading digit) and should end with "_" so renamed names stay readable.
SHIM_SYMBOL_PREFIX = "executorch_"

# The preprocessor macro that carries the prefix into C/C++ compiles. The
# generated rename header only renames when this macro is defined.
SHIM_SYMBOL_PREFIX_DEFINE = "AOTI_SHIM_SYMBOL_PREFIX"

# Symbol-name families the prefix covers. A symbol whose name starts with one
# of these (and not with the prefix) is "unprefixed" for the linter.
# `aoti_torch_` is the AOTInductor C shim ABI; `torch_` is the stable C ABI
# declared in torch/csrc/stable/c/shim.h, which blobs may import as well;
# `aoti_record_function_` is the profiler hook pair declared beside the shims.
# Together they cover every name in the generated rename header (a test checks).
SHIM_SYMBOL_FAMILIES = [
    "aoti_torch_",
    "aoti_record_function_",
    "torch_",
]

# Ready-made lists for rules: `defines`/`local_defines` take the bare
# NAME=VALUE form, compiler command lines take the -D form.
SHIM_PREFIX_DEFINES = [SHIM_SYMBOL_PREFIX_DEFINE + "=" + SHIM_SYMBOL_PREFIX]
SHIM_PREFIX_FLAGS = ["-D" + d for d in SHIM_PREFIX_DEFINES]
