"""The models the GPU experiment compiles: an MLP and a conv net, with inputs."""

from __future__ import annotations

from typing import Any


def build(name: str, device: str) -> tuple[Any, tuple[Any, ...]]:
    """(model in eval mode on `device`, example inputs) for `name` ("mlp" or "convnet")."""
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 10),
        )
        inputs: tuple[Any, ...] = (torch.randn(8, 256),)
    elif name == "convnet":

        class ConvNet(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv1 = torch.nn.Conv2d(3, 16, kernel_size=3, padding=1)
                self.bn = torch.nn.BatchNorm2d(16)
                self.conv2 = torch.nn.Conv2d(16, 32, kernel_size=3, stride=2)
                self.head = torch.nn.Linear(32, 10)

            def forward(self, x: Any) -> Any:
                x = torch.relu(self.bn(self.conv1(x)))
                x = torch.relu(self.conv2(x))
                x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
                return self.head(x)

        model = ConvNet()
        inputs = (torch.randn(4, 3, 32, 32),)
    else:
        raise ValueError(f"unknown model {name!r}")
    model = model.eval().to(device)
    return model, tuple(t.to(device) for t in inputs)


def eager(model: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """Reference outputs in full fp32 (no TF32 in cuBLAS or cuDNN), on the CPU."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.detach().cpu() for o in outs]
