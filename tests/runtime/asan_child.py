"""Child process for the sanitizer test: runs blobs on the ASan+UBSan build.

Usage: asan_child.py run PT2 NPZ [PT2 NPZ ...] | hostile PT2 | use-after-free
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


def hostile(blob_path: str) -> int:
    """The C ELF pre-check on truncated and bit-flipped blobs: errors, never a crash."""
    import random
    import zipfile

    from shimkit.runtime.capi import runtime_lib

    with zipfile.ZipFile(blob_path) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith(".so")))
    lib = runtime_lib().lib
    rng = random.Random(0)
    accepted = rejected = 0
    cuts = sorted(
        {0, 1, 16, 63, 64, 65, 4096, len(data) // 2, len(data) - 1, len(data)}
        | {rng.randrange(len(data)) for _ in range(100)}
    )
    variants = [data[:n] for n in cuts]
    # Corrupt the section header table and the dynamic symbol area.
    shoff = int.from_bytes(data[0x28:0x30], "little")
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            where = rng.choice(
                [
                    rng.randrange(64),
                    shoff + rng.randrange(len(data) - shoff),
                    rng.randrange(len(data)),
                ]
            )
            mutated[min(where, len(data) - 1)] = rng.randrange(256)
        variants.append(bytes(mutated))
    for blob in variants:
        rc = lib.shimkit_check_blob(blob, len(blob))
        if rc == 0:
            accepted += 1
        else:
            rejected += 1
            assert lib.shimkit_last_error()  # a message every time
    print(f"hostile: {rejected} rejected, {accepted} accepted, no sanitizer report")
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
    if sys.argv[1] == "hostile":
        raise SystemExit(hostile(sys.argv[2]))
    raise SystemExit(use_after_free())
