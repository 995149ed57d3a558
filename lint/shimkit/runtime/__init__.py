"""Run prefixed AOTInductor blobs on shimkit's slim CPU shims, from Python.

    model = shimkit.runtime.load("model.pt2")   # or a blob .so
    outputs = model(x)                          # numpy arrays or CPU torch tensors in,
                                                # a list of numpy arrays out

The C libraries come from $SHIMKIT_LIB_DIR, the package (a wheel), or a build
of the checkout (see `shimkit.runtime.build`). libtorch may be loaded in the same process: blobs
bind only to the private, prefixed shims.
"""

from shimkit.runtime.blob import BlobSource, InputSpec, read_blob
from shimkit.runtime.model import Model, load

__all__ = ["BlobSource", "InputSpec", "Model", "load", "read_blob"]
