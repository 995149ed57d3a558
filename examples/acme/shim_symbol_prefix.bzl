"""acme's private shim ABI: the single source of truth for acme's shim prefix.

acme is a runtime project that adopts shimkit (this folder is the foreign
consumer shimkit's tests build from outside its checkout). It keeps the same
constants as shimkit's own rules/shim_symbol_prefix.bzl, with acme's prefix.
"""

SHIM_SYMBOL_PREFIX = "acme_"

SHIM_SYMBOL_PREFIX_DEFINE = "AOTI_SHIM_SYMBOL_PREFIX"

SHIM_SYMBOL_FAMILIES = [
    "aoti_torch_",
    "aoti_record_function_",
    "torch_",
]

SHIM_PREFIX_DEFINES = [SHIM_SYMBOL_PREFIX_DEFINE + "=" + SHIM_SYMBOL_PREFIX]
SHIM_PREFIX_FLAGS = ["-D" + d for d in SHIM_PREFIX_DEFINES]
