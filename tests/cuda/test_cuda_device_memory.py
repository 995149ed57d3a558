"""Inputs and outputs in GPU memory through `shimkit.runtime.load(path, device="cuda")`: read
in place, no host copy, outputs owned by the caller. The fake CUDA runtime's device memory is
host memory, so a numpy array behind a `__cuda_array_interface__` stands for a CuPy/torch
array here; torch CUDA tensors themselves run on the GPU (tools/gpu/probe_device_io.py).
What needs no runtime (parsing, checks, ownership): tests/runtime/test_device_memory.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.cuda.test_cuda_python import child, result, with_fakes

DEVICE_IO = """
import ctypes, gc, json, os, sys
import numpy as np
import shimkit.runtime
from shimkit.runtime.cuda import cuda_runtime

fake = ctypes.CDLL(os.environ["SHIMKIT_CUDART"])
fake.fake_cuda_counter.restype = ctypes.c_long
count = lambda name: int(fake.fake_cuda_counter(name.encode()))

class OnDevice:
    # What CuPy or Numba hand over: the fake's device memory is host memory.
    def __init__(self, array, stream=None, strides=None):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str, "strides": strides,
            "data": (array.ctypes.data, False), "version": 3, "stream": stream,
        }

def read(out):
    face = out.__cuda_array_interface__
    n = int(np.prod(face["shape"])) * 4
    raw = (ctypes.c_char * n).from_address(face["data"][0])
    return np.frombuffer(bytes(raw), np.float32).reshape(face["shape"])

blob, graphs = sys.argv[1], sys.argv[2] == "graphs"
model = shimkit.runtime.load(blob, device="cuda", graphs=graphs)
r = {"ok": [], "copies": [], "syncs": [], "pointers": []}
x = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
kept = []
for i in range(3):
    xi = np.ascontiguousarray(x * (i + 1))
    copies, syncs = count("copy"), count("sync")
    out = model(OnDevice(xi, stream=(1, 0xBEEF, 2)[i]))  # legacy, a stream, per-thread
    r["copies"].append(count("copy") - copies)
    r["syncs"].append(count("sync") - syncs)
    r["ok"].append(bool(np.allclose(read(out[0]), xi @ xi, atol=1e-5)))
    r["pointers"].append(out[0].__cuda_array_interface__["data"][0])
    kept.append((out[0], xi))
r["type"] = type(kept[0][0]).__name__
r["repr"] = repr(kept[0][0])
r["still"] = [bool(np.allclose(read(o), xi @ xi, atol=1e-5)) for o, xi in kept[:2]]
copies = count("copy")
host = model(x)[0]
r["host_copies"] = count("copy") - copies
r["host_ok"] = bool(np.allclose(host, x @ x, atol=1e-5))
rt = cuda_runtime()
cached = rt.cached_bytes()
del kept, out
gc.collect()
r["freed"] = rt.cached_bytes() - cached
# DLPack, taken as a consumer takes it: the pointer, the capsule renamed, the deleter later.
import shimkit.runtime.dlpack as dl
out = model(OnDevice(x))[0]
capsule = out.__dlpack__(stream=1)
get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
managed = get(capsule, b"dltensor")
t = dl.DLManagedTensor.from_address(managed).dl_tensor
n = t.ndim
r["dlpack"] = [t.device_type, t.device_id, n, t.dtype_code, t.dtype_bits, t.dtype_lanes,
               [t.shape[k] for k in range(n)], [t.strides[k] for k in range(n)], t.byte_offset,
               t.data == out.pointer]
raw = (ctypes.c_char * 64).from_address(t.data)
r["dlpack_ok"] = bool(np.allclose(np.frombuffer(bytes(raw), np.float32).reshape(4, 4), x @ x))
used = ctypes.c_char_p(b"used_dltensor")
rename(capsule, used)
del capsule, t
cached = rt.cached_bytes()
del out
gc.collect()
r["dlpack_freed_while_taken"] = rt.cached_bytes() - cached
dl.DLManagedTensor.from_address(managed).deleter(managed)
r["dlpack_freed"] = rt.cached_bytes() - cached
# An output handed to the next call through DLPack only (as JAX hands arrays over).
class DLPackOnly:
    def __init__(self, tensor):
        self.tensor = tensor
    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()
    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__(stream=stream)
first = model(OnDevice(x))[0]
second = model(DLPackOnly(first))[0]
r["dlpack_input_ok"] = bool(np.allclose(read(second), (x @ x) @ (x @ x), rtol=1e-5))
cached = rt.cached_bytes()
del first
gc.collect()
r["dlpack_input_released"] = rt.cached_bytes() - cached
errors = {}
for name, args in {
    "strided": (OnDevice(x, strides=(4, 16)),),
    "count": (OnDevice(x), OnDevice(x)),
    "dtype": (OnDevice(np.zeros((4, 4), np.complex64)),),
}.items():
    try:
        model(*args)
        errors[name] = None
    except Exception as exc:
        errors[name] = f"{type(exc).__name__}: {exc}"
r["errors"] = errors
# The C API itself refuses a caller that expects another number of outputs.
from shimkit.runtime.capi import Tensor
lib = rt.lib
outs, owners = (Tensor * 2)(), (ctypes.c_void_p * 2)()
import shimkit.runtime.device_memory as dm
held = OnDevice(x)
desc = (Tensor * 1)(dm.device_inputs([held], None, 0)[0].descriptor())
code = lib.shimkit_cuda_model_run_device(model._handle, desc, 1, outs, owners, 2)
r["c_api"] = [code, lib.shimkit_cuda_last_error().decode()]
print(json.dumps(r))
"""


def test_device_inputs_are_read_in_place_and_outputs_stay_on_the_device(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    env = with_fakes(cuda_libs, fakes)
    eager = result(child(DEVICE_IO, str(fake_blob), "eager", env=env))
    assert eager["ok"] == [True] * 3 and eager["host_ok"], eager
    assert (
        eager["type"] == "DeviceTensor" and "shape=[4, 4], dtype=float32, cuda:0" in eager["repr"]
    )
    # No copy through the host (a host call copies the input in and the output out).
    assert eager["copies"] == [0, 0, 0] and eager["host_copies"] >= 2, eager
    # The producer's own stream and the per-thread default stream are waited for; the
    # legacy default stream is ordered before the run already.
    assert eager["syncs"][1:] == [eager["syncs"][0] + 1] * 2, eager
    # Each output is the caller's: three live outputs, three buffers, none overwritten.
    assert len(set(eager["pointers"])) == 3 and eager["still"] == [True, True], eager
    # Dropping them gives their memory back to the shims' cache.
    assert eager["freed"] >= 3 * 16 * 4, eager
    # DLPack: kDLCUDA on cuda:0, float32 (kDLFloat, 32 bits, 1 lane), 4x4 in C order, the
    # output's own memory; it lives while the consumer holds it, past the DeviceTensor.
    assert eager["dlpack"] == [2, 0, 2, 2, 32, 1, [4, 4], [4, 1], 0, True], eager
    assert eager["dlpack_ok"] and eager["dlpack_freed_while_taken"] == 0, eager
    assert eager["dlpack_freed"] >= 16 * 4, eager
    # Taken as an input: right, and its export released after the call (so the memory goes
    # back with the DeviceTensor).
    assert eager["dlpack_input_ok"] and eager["dlpack_input_released"] >= 16 * 4, eager
    errors = eager["errors"]
    assert "strides [1, 4] (elements) is not laid out densely" in errors["strided"]
    assert "model takes 1 inputs, got 2" in errors["count"]
    assert "unsupported dtype complex64" in errors["dtype"]
    assert all(str(fake_blob) in message for message in errors.values()), errors
    assert eager["c_api"] == [6, "model has 1 outputs, caller expects 2"], eager
    assert not any("Traceback" in message for message in errors.values())


def test_replayed_outputs_are_copies_the_next_replay_leaves_alone(
    cuda_libs: dict[str, Path], fakes: dict[str, Path], fake_blob: Path
) -> None:
    env = with_fakes(cuda_libs, fakes)
    replayed = result(child(DEVICE_IO, str(fake_blob), "graphs", env=env))
    # The fake computes at issue, so only the eager run and the captured run compute (the
    # real GPU's replays: tools/gpu); the point here is that the outputs the graph's
    # buffers held were copied out, so the later replays did not overwrite them.
    assert replayed["ok"][:2] == [True, True] and replayed["still"] == [True, True], replayed
    assert len(set(replayed["pointers"])) == 3, replayed
    # Device-to-device copies only: the inputs into the graph's buffers, the outputs out.
    assert all(n <= 2 for n in replayed["copies"][1:]), replayed
