"""Run prefixed AOTInductor blobs on shimkit's slim shims, from Python, CPU or CUDA.

    model = shimkit.runtime.load("model.pt2")                  # slim CPU runtime
    model = shimkit.runtime.load("model.pt2", device="cuda")   # slim CUDA runtime
    outputs = model(x)         # numpy arrays (or torch tensors) in, a list of numpy arrays out
    outputs = model(x.cuda())  # CUDA: torch CUDA tensors in and out, no host copy

The C libraries come from $SHIMKIT_LIB_DIR, the package (a wheel; CPU only), or a
build of the checkout (see `shimkit.runtime.build`). libtorch may be loaded in the same
process: blobs bind only to the private, prefixed shims. A process holds the CPU or the
CUDA runtime, not both (they export the same names).
"""

from shimkit.runtime.blob import BlobSource, InputSpec, blob_device, read_blob
from shimkit.runtime.device_memory import DeviceTensor
from shimkit.runtime.model import Model, load, manual_seed

__all__ = [
    "BlobSource",
    "DeviceTensor",
    "InputSpec",
    "Model",
    "blob_device",
    "load",
    "manual_seed",
    "read_blob",
]
