"""The shim name list and the generated rename header.

`shim_names(include_dir)` is the one list every generator uses (rename header,
forwarding library, rewrite): the C-linkage `AOTI_TORCH_EXPORT` names declared
by torch's C shim headers.
"""

from shimkit.header.parse import shim_headers, shim_names
from shimkit.header.render import render_families_header, render_rename_header
from shimkit.header.torchdir import TorchInstall, find_torch

__all__ = [
    "TorchInstall",
    "find_torch",
    "render_families_header",
    "render_rename_header",
    "shim_headers",
    "shim_names",
]
