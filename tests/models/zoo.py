"""Small real-model families for the slim CPU runtime (written here, not downloaded).

Each entry builds an eval-mode `nn.Module`, example inputs and, for dynamic models,
torch.export dynamic shapes. Sizes are small so a compile takes seconds; the
architectures are the real ones (the same ops Inductor sees in full-size models).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ZooModel:
    model: nn.Module
    inputs: tuple[Any, ...]
    dynamic_shapes: Any = None
    # Further inputs the same blob must serve (other dynamic sizes).
    more_inputs: list[tuple[Any, ...]] = field(default_factory=list)


def _seeded(seed: int) -> torch.Generator:
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


# --- ResNet-style -----------------------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.down(x))


class ResNet(nn.Module):
    """ResNet-18's layout (7x7 stem, max pool, 4 stages of basic blocks, avg pool, fc)."""

    def __init__(self, widths: tuple[int, ...] = (64, 128, 256, 512), blocks: int = 2,
                 classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        cin = widths[0]
        for i, w in enumerate(widths):
            for b in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if (b == 0 and i > 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- MobileNetV2 (inverted residual, depthwise) ------------------------------


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return x + y if self.use_res else y


class MobileNetV2(nn.Module):
    # (expand, channels, repeats, stride) as in the paper.
    FULL = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
            (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, setting: tuple[tuple[int, int, int, int], ...] = FULL, stem: int = 32,
                 last: int = 1280, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU6()
        ]
        cin = stem
        for t, c, n, s in setting:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --- transformer encoder --------------------------------------------------------


class Encoder(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=pad)


# --- decoder-only GPT -------------------------------------------------------------


class Attention(nn.Module):
    """Causal self-attention; `kv_heads < heads` is grouped-query attention."""

    def __init__(self, d: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * kv_heads * self.hd)
        self.o = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, self.kv_heads, self.hd).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads
        )
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class GPT(nn.Module):
    def __init__(self, vocab: int = 97, d: int = 64, heads: int = 4, kv_heads: int = 4,
                 layers: int = 2, ctx: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(d), "attn": Attention(d, heads, kv_heads),
                "ln2": nn.LayerNorm(d),
                "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)),
            }))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = x + blk["attn"](blk["ln1"](x))
            x = x + blk["mlp"](blk["ln2"](x))
        return self.head(self.ln(x))


class MaskedAttention(nn.Module):
    """SDPA with an explicit mask input: bool (True = attend) or additive float."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(
            b, t, d)


# --- recurrent -------------------------------------------------------------------


class LSTMTagger(nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, layers: int = 2, out: int = 5,
                 bidirectional: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(d_in, hidden, layers, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.fc(y)


class GRUTagger(nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, layers: int = 2, out: int = 5) -> None:
        super().__init__()
        self.rnn = nn.GRU(d_in, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = self.rnn(x)
        return self.fc(y), h


# --- embedding-bag recommender ------------------------------------------------------


class Recommender(nn.Module):
    """EmbeddingBag features, then index_add / cumsum / argmax / sort / gather / scatter."""

    def __init__(self, items: int = 50, d: int = 16, mode: str = "sum") -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(items, d, mode=mode)
        self.user = nn.Embedding(20, d)
        self.score = nn.Linear(d, items)

    def forward(self, user: torch.Tensor, history: torch.Tensor, offsets: torch.Tensor,
                weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.bag(history, offsets)  # [B, d]
        u = self.user(user)  # [B, d]
        logits = self.score(h * u)  # [B, items]
        # Popularity: count each item of the history (index_add of per-sample weights).
        pop = torch.zeros(logits.shape[1], dtype=logits.dtype).index_add(0, history, weights)
        logits = logits + pop
        ranked, order = torch.sort(logits, dim=1, descending=True)
        best = torch.argmax(logits, dim=1)
        top_logit = torch.gather(logits, 1, best.unsqueeze(1))
        mass = torch.cumsum(torch.softmax(ranked, dim=1), dim=1)
        seen = torch.zeros_like(logits).scatter(1, history.view(logits.shape[0], -1), 1.0)
        return order, best, top_logit, mass, seen


# --- dynamic batch --------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _resnet() -> ZooModel:
    _seeded(1)
    return ZooModel(ResNet(widths=(8, 16, 32, 64), blocks=1, classes=10).eval(),
                    (_randn(2, 3, 32, 32),))


def _resnet_cl() -> ZooModel:
    z = _resnet()
    return ZooModel(z.model.to(memory_format=torch.channels_last),
                    (z.inputs[0].contiguous(memory_format=torch.channels_last),))


def _mobilenet() -> ZooModel:
    _seeded(2)
    setting = ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2))
    return ZooModel(MobileNetV2(setting, stem=8, last=64, classes=10).eval(),
                    (_randn(2, 3, 32, 32),))


def _encoder() -> ZooModel:
    _seeded(3)
    x = _randn(2, 10, 64)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[1, 7:] = True
    return ZooModel(Encoder().eval(), (x, pad))


def _gpt() -> ZooModel:
    _seeded(4)
    return ZooModel(GPT().eval(), (torch.randint(0, 97, (2, 16)),))


def _gpt_gqa() -> ZooModel:
    _seeded(5)
    return ZooModel(GPT(heads=8, kv_heads=2).eval(), (torch.randint(0, 97, (2, 16)),))


def _attn_bool_mask() -> ZooModel:
    _seeded(6)
    mask = torch.rand(2, 1, 12, 12) > 0.3
    mask[..., 0] = True  # every row attends somewhere
    return ZooModel(MaskedAttention().eval(), (_randn(2, 12, 32), mask))


def _attn_float_mask() -> ZooModel:
    _seeded(7)
    return ZooModel(MaskedAttention().eval(), (_randn(2, 12, 32), _randn(2, 4, 12, 12)))


def _lstm() -> ZooModel:
    _seeded(8)
    return ZooModel(LSTMTagger().eval(), (_randn(3, 7, 16),))


def _lstm_bidir() -> ZooModel:
    _seeded(9)
    return ZooModel(LSTMTagger(bidirectional=True, layers=1).eval(), (_randn(3, 7, 16),))


def _gru() -> ZooModel:
    _seeded(10)
    return ZooModel(GRUTagger().eval(), (_randn(3, 7, 16),))


def _recommender() -> ZooModel:
    _seeded(11)
    b, per = 4, 3
    history = torch.randint(0, 50, (b * per,))
    offsets = torch.arange(0, b * per, per)
    return ZooModel(Recommender().eval(),
                    (torch.randint(0, 20, (b,)), history, offsets, torch.rand(b * per)))


def _dynamic_mlp() -> ZooModel:
    _seeded(12)
    batch = torch.export.Dim("batch", min=1, max=256)
    return ZooModel(MLP().eval(), (_randn(4, 16),), dynamic_shapes=({0: batch},),
                    more_inputs=[(_randn(1, 16),), (_randn(200, 16),)])


ZOO: dict[str, Callable[[], ZooModel]] = {
    "resnet": _resnet,
    "resnet_channels_last": _resnet_cl,
    "mobilenet_v2": _mobilenet,
    "transformer_encoder": _encoder,
    "gpt": _gpt,
    "gpt_gqa": _gpt_gqa,
    "sdpa_bool_mask": _attn_bool_mask,
    "sdpa_float_mask": _attn_float_mask,
    "lstm": _lstm,
    "lstm_bidirectional": _lstm_bidir,
    "gru": _gru,
    "recommender": _recommender,
    "dynamic_mlp": _dynamic_mlp,
}
