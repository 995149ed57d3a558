"""Child process for the sanitizer test: runs blobs on the ASan+UBSan build.

Usage: asan_child.py run PT2 NPZ [PT2 NPZ ...] | asan_child.py use-after-free
Needs SHIMKIT_LIB_DIR pointing at the asan build and libasan preloaded. Never
imports torch.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np


def run_models(pairs: list[str]) -> int:
    import shimkit.runtime as rt

    for pt2, npz in zip(pairs[::2], pairs[1::2], strict=True):
        data = np.load(npz)
        ins = [
            data[k]
            for k in sorted((k for k in data.files if k.startswith("in")), key=lambda k: int(k[2:]))
        ]
        outs = [
            data[k]
            for k in sorted(
                (k for k in data.files if k.startswith("out")), key=lambda k: int(k[3:])
            )
        ]
        with rt.load(pt2, lint=False) as model:
            for _ in range(3):
                got = model(*ins)
                for g, w in zip(got, outs, strict=True):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        print(f"ok {pt2}")
    return 0


def use_after_free() -> int:
    """Negative control: a real heap-use-after-free through the shim API."""
    from shimkit.config import load_config
    from shimkit.runtime.capi import runtime_lib

    lib = ctypes.CDLL(str(runtime_lib().paths.shims))
    prefix = load_config().prefix
    empty = getattr(lib, prefix + "aoti_torch_empty_strided")
    free = getattr(lib, prefix + "aoti_torch_delete_tensor_object")
    get_dim = getattr(lib, prefix + "aoti_torch_get_dim")
    sizes = (ctypes.c_int64 * 1)(4)
    handle = ctypes.c_void_p()
    empty(ctypes.c_int64(1), sizes, sizes, 6, 0, -1, ctypes.byref(handle))
    free(handle)
    dim = ctypes.c_int64()
    get_dim(handle, ctypes.byref(dim))  # reads freed memory
    print("use-after-free went unnoticed")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        raise SystemExit(run_models(sys.argv[2:]))
    raise SystemExit(use_after_free())
