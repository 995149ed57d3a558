"""Run .pt2 packages with torch's runner and the forwarding library, in a process of its own.

The forwarding library defines every prefixed shim name RTLD_GLOBAL; loaded in
the pytest process it would capture the imports of any blob loaded later
(e.g. by tests of the slim runtime). So numerics run here, in a subprocess:

    python run_packages.py FORWARDER PACKAGE=MODEL_FILE ...

prints one JSON object: "PACKAGE=MODEL_FILE" -> {"ok": bool, "detail": str}.
"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import sys


def check(package: str, model_file: str) -> dict[str, object]:
    import torch

    namespace = runpy.run_path(model_file)
    model, inputs = namespace["model"], tuple(namespace["example_inputs"])
    try:
        runner = torch._inductor.aoti_load_package(package)
        with torch.no_grad():
            expected, actual = model(*inputs), runner(*inputs)
        if isinstance(expected, torch.Tensor):
            expected = [expected]
            actual = [actual] if isinstance(actual, torch.Tensor) else actual
        assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    except Exception as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "detail": ""}


def main(argv: list[str]) -> int:
    import torch  # noqa: F401  (libtorch must be loaded before the forwarder binds)

    ctypes.CDLL(argv[0], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    results = {}
    for pair in argv[1:]:
        package, model_file = pair.split("=", 1)
        results[pair] = check(package, model_file)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
