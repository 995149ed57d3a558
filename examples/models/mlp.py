"""A small MLP: `shimkit compile examples/models/mlp.py -o mlp.pt2`."""

import torch

torch.manual_seed(0)

model = torch.nn.Sequential(
    torch.nn.Linear(16, 32),
    torch.nn.ReLU(),
    torch.nn.Linear(32, 8),
).eval()

example_inputs = (torch.randn(4, 16),)
