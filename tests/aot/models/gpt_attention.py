"""A small decoder-only GPT: token and position embeddings, two blocks of causal
grouped-query attention (4 query heads over 2 key/value heads) with a padding
mask, and a tied head. `shimkit compile` model file for tests/aot/test_attention.py."""

import torch
import torch.nn.functional as F

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.q = torch.nn.Linear(dim, dim)
        self.kv = torch.nn.Linear(dim, 2 * kv_heads * self.head_dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)
        )

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        # Keys that are padding are masked (boolean mask, True = attend).
        masked = F.scaled_dot_product_attention(
            q, k, v, attn_mask=padding[:, None, None, :], enable_gqa=True
        )
        a = (causal + masked).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(a)
        return x + self.mlp(self.norm2(x))


class Gpt(torch.nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, seq: int = 16) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, dim)
        self.positions = torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList([Block(dim, 4, 2) for _ in range(2)])
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(positions)
        for block in self.blocks:
            x = block(x, padding)
        return self.norm(x) @ self.tokens.weight.t()


model = Gpt().eval()
example_inputs = (
    torch.randint(0, 64, (2, 16)),
    torch.arange(16)[None, :].expand(2, 16) < torch.tensor([[16], [11]]),
)
