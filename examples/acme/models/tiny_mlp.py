"""acme's model: `shimkit compile models/tiny_mlp.py -o tiny_mlp.pt2` from acme's root."""

import torch

torch.manual_seed(0)

model = torch.nn.Sequential(
    torch.nn.Linear(8, 16),
    torch.nn.ReLU(),
    torch.nn.Linear(16, 4),
).eval()

example_inputs = (torch.randn(2, 8),)
