"""GPU probe: ATen's output memory formats on CUDA against the CPU's, for the ops the slim
CUDA shims run through the CPU shims on the host (pools) or may (3-D convolutions cuDNN
refuses, transposed convolutions), and whether FakeTensor (what Inductor compiles against)
agrees with eager. Prints JSON; results in docs/benchmarks.md (run 15).

    python3 tools/gpu/probe_cuda_formats.py > OUT.json
"""

import json

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

cl2, cl3 = torch.channels_last, torch.channels_last_3d
x2 = torch.randn(2, 3, 13, 13, device="cuda").contiguous(memory_format=cl2)
x3 = torch.randn(2, 3, 7, 9, 9, device="cuda").contiguous(memory_format=cl3)
x3b1 = torch.randn(1, 3, 7, 9, 9, device="cuda").contiguous(memory_format=cl3)
w3 = torch.randn(4, 3, 3, 3, 3, device="cuda")
wt3 = torch.randn(3, 4, 2, 2, 2, device="cuda")
ops = {
    "max_pool2d_with_indices": (
        x2,
        lambda x: torch.ops.aten.max_pool2d_with_indices(x, [7, 7], [2, 2], [3, 3], [1, 1], False),
    ),
    "_adaptive_avg_pool2d": (x2, lambda x: (torch.ops.aten._adaptive_avg_pool2d(x, [3, 5]),)),
    "adaptive_max_pool2d": (x2, lambda x: torch.ops.aten.adaptive_max_pool2d(x, [3, 5])),
    "avg_pool2d": (x2, lambda x: (torch.ops.aten.avg_pool2d(x, [6, 6], [2, 2]),)),
    "max_pool3d_with_indices": (
        x3,
        lambda x: torch.ops.aten.max_pool3d_with_indices(
            x, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], False
        ),
    ),
    "avg_pool3d": (x3, lambda x: (torch.ops.aten.avg_pool3d(x, [3, 3, 3], [2, 2, 2], [1, 1, 1]),)),
    "_adaptive_avg_pool3d": (x3, lambda x: (torch.ops.aten._adaptive_avg_pool3d(x, [2, 3, 4]),)),
    "adaptive_max_pool3d": (x3, lambda x: torch.ops.aten.adaptive_max_pool3d(x, [2, 3, 4])),
    "conv3d_batch1": (
        x3b1,
        lambda x: (
            torch.ops.aten.convolution(
                x, w3.to(x.device), None, [1] * 3, [1] * 3, [1] * 3, False, [0] * 3, 1
            ),
        ),
    ),
    "conv_transpose3d_batch1": (
        x3b1,
        lambda x: (
            torch.ops.aten.convolution(
                x, wt3.to(x.device), None, [2] * 3, [0] * 3, [1] * 3, True, [0] * 3, 1
            ),
        ),
    ),
}
out = {}
for name, (x, f) in ops.items():
    eager = [list(t.stride()) for t in f(x)]
    with FakeTensorMode(allow_non_fake_inputs=True) as m:
        fake = [list(t.stride()) for t in f(m.from_tensor(x))]
    cpu = [list(t.stride()) for t in f(x.cpu())]
    out[name] = {
        "cuda_eager": eager,
        "cuda_fake": fake,
        "cpu_eager": cpu,
        "cuda_equals_cpu": eager == cpu,
        "fake_equals_eager": fake == eager,
    }
print(json.dumps(out, indent=1))
