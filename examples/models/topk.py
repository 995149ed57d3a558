"""A model with fallback ops (topk, sort): exercises the cpu_topk / cpu_sort_stable shims."""

import torch


class TopK(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(12, 20)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scores = self.proj(x)
        values, indices = torch.topk(scores, k=5, dim=-1)
        ordered, _ = torch.sort(scores, dim=-1, stable=True)
        return values, indices, ordered


torch.manual_seed(0)
model = TopK().eval()
example_inputs = (torch.randn(3, 12),)
