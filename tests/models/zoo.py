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
    # Float outputs must match eager within rtol x the largest magnitude of the output.
    rtol: float = 1e-4


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

    def __init__(
        self, widths: tuple[int, ...] = (64, 128, 256, 512), blocks: int = 2, classes: int = 1000
    ) -> None:
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
    FULL = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(
        self,
        setting: tuple[tuple[int, int, int, int], ...] = FULL,
        stem: int = 32,
        last: int = 1280,
        classes: int = 1000,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, stem, 3, 2, 1, bias=False),
            nn.BatchNorm2d(stem),
            nn.ReLU6(),
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


# --- encoder-decoder with transposed convolutions (U-Net-like) ---------------------


class TinyUNet(nn.Module):
    """Strided convolutions down, transposed convolutions up, skip connections."""

    def __init__(self, c: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(2 * c, 2 * c, 4, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(4 * c, c, 3, stride=2, padding=1, output_padding=1)
        self.head = nn.Conv2d(2 * c, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(d1)
        y = F.relu(self.up2(self.bottom(d2)))
        y = F.relu(self.up1(torch.cat([y, d2], dim=1)))
        return self.head(torch.cat([y, d1], dim=1))


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


class Block(nn.Module):
    """A pre-LayerNorm decoder block: causal self-attention and a GELU MLP."""

    def __init__(self, d: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, kv_heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(
        self,
        vocab: int = 97,
        d: int = 64,
        heads: int = 4,
        kv_heads: int = 4,
        layers: int = 2,
        ctx: int = 32,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads, kv_heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        return self.head(self.ln(x))


class MaskedAttention(nn.Module):
    """SDPA with explicit masks: a boolean one (True = attend) and an additive float one."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)

    def attend(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return y.transpose(1, 2).reshape(b, t, d)

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor, bias: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attend(x, keep), self.attend(x, bias)


# --- recurrent -------------------------------------------------------------------


class Recurrent(nn.Module):
    """A 2-layer LSTM, a bidirectional LSTM and a 2-layer GRU over one sequence."""

    def __init__(self, d_in: int = 16, hidden: int = 32, out: int = 5) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, 2, batch_first=True)
        self.bilstm = nn.LSTM(d_in, hidden, 1, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(d_in, hidden, 2, batch_first=True)
        self.fc = nn.Linear(4 * hidden, out)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y1, (_, c1) = self.lstm(x)
        y2, _ = self.bilstm(x)
        y3, h3 = self.gru(x)
        return self.fc(torch.cat([y1, y2, y3], dim=-1)), c1, h3


# --- embedding-bag recommender ------------------------------------------------------


class Recommender(nn.Module):
    """EmbeddingBag features and norm-limited user vectors (max_norm: compile's embedding
    form), then index_add / cumsum / argmax / sort / gather / scatter, and distances to
    item vectors (cdist: Euclidean from dot products over 50 items, L1 direct over 8)."""

    def __init__(self, items: int = 50, d: int = 16, mode: str = "sum") -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(items, d, mode=mode)
        self.user = nn.Embedding(20, d, max_norm=2.0)  # rows of norm ~4: most scaled
        self.score = nn.Linear(d, items)
        self.item_vectors = nn.Parameter(torch.randn(items, d))

    def forward(
        self,
        user: torch.Tensor,
        history: torch.Tensor,
        offsets: torch.Tensor,
        weights: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        h = self.bag(history, offsets)  # [B, d]
        u = self.user(user)  # [B, d]
        logits = self.score(h * u)  # [B, items]
        # Popularity: count each item of the history (index_add of per-sample weights).
        pop = torch.zeros(logits.shape[1], dtype=logits.dtype, device=logits.device)
        pop = pop.index_add(0, history, weights)
        logits = logits + pop
        ranked, order = torch.sort(logits, dim=1, descending=True)
        best = torch.argmax(logits, dim=1)
        top_logit = torch.gather(logits, 1, best.unsqueeze(1))
        mass = torch.cumsum(torch.softmax(ranked, dim=1), dim=1)
        seen = torch.zeros_like(logits).scatter(1, history.view(logits.shape[0], -1), 1.0)
        near = torch.cdist(h * u, self.item_vectors)
        near_l1 = torch.cdist(u, self.item_vectors[:8], p=1.0)
        return order, best, top_logit, mass, seen, near, near_l1


# --- index, scan and search ops that Inductor leaves to fallbacks ------------------


class IndexOps(nn.Module):
    """scatter_reduce, scatter_add, index_reduce, cumprod, logcumsumexp, searchsorted,
    bucketize, topk, the order statistics (kthvalue, mode, median, nanmedian, of the whole
    tensor and along a dim: the latter in compile's math form) and a histogram (histc) on a
    small projection of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 6)
        self.register_buffer("edges", torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]))

    def forward(self, x: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor) -> tuple[Any, ...]:
        y = self.proj(x)  # [4, 6]
        amax = y.scatter_reduce(1, idx, y[:, :3], reduce="amax", include_self=False)
        mean = y.scatter_reduce(1, idx, y[:, 3:], reduce="mean", include_self=True)
        added = torch.zeros_like(y).scatter_add(1, idx, y[:, :3])
        prod = y.index_reduce(0, rows, y[:3] * 0.5, "prod")
        cum = torch.cumprod(torch.tanh(y), 1), torch.logcumsumexp(y, 1)
        sorted_y, _ = torch.sort(y, dim=1)
        pos = torch.searchsorted(sorted_y, y), torch.bucketize(y, self.edges, right=True)
        top = torch.topk(y, 2, dim=1)
        second = torch.kthvalue(y, 2, dim=1)
        common = torch.mode(torch.round(y * 2), dim=0)
        centred = y - y.median() + y.nanmedian()
        rounded = torch.round(y * 2)  # ties
        middle, nan_middle = rounded.median(dim=1), rounded.nanmedian(dim=0, keepdim=True)
        # Which of tied medians an index names is device-specific in ATen (CUDA's differs
        # from the CPU's, which compile's form follows): the outputs are the values at the
        # indices, equal on every device. tests/aot/test_median_math_form.py compares the
        # indices themselves with the CPU's.
        at_middle = rounded.gather(1, middle.indices[:, None])
        at_nan_middle = rounded.gather(0, nan_middle.indices)
        hist = torch.histc(torch.tanh(y), bins=5, min=-1.0, max=1.0)
        return (
            amax, mean, added, prod, *cum, *pos, top.values, top.indices, second.values,
            second.indices, common.values, common.indices, centred, hist, middle.values,
            at_middle, nan_middle.values, at_nan_middle,
        )  # fmt: skip


# --- pooling and attention fallbacks of older architectures -------------------------


class PoolingNet(nn.Module):
    """A CNN with spatial pyramid pooling (9x9 and 13x13 max pools), CBAM-style channel
    attention (average- and max-pooled descriptors), regions average-pooled into tokens,
    and a baddbmm attention over them with a learned bias. The pooling windows (6x6 and up
    to 13x13 elements, 17 not a multiple of 3) are larger than Inductor's own loops take
    (25), so it calls the avg_pool2d, adaptive_max_pool2d and _adaptive_avg_pool2d
    fallbacks (the max pools with indices Inductor's C++ backend writes itself)."""

    def __init__(self, channels: int = 16, classes: int = 10) -> None:
        super().__init__()
        c = channels
        self.features = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.BatchNorm2d(c), nn.ReLU())
        self.gate = nn.Sequential(nn.Linear(c, c // 4), nn.ReLU(), nn.Linear(c // 4, c))
        self.q, self.k = nn.Linear(c, c), nn.Linear(c, c)
        self.position_bias = nn.Parameter(torch.randn(9, 9) * 0.1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.features(x)  # [n, c, 17, 17]
        c = h.shape[1]
        # Spatial pyramid pooling: 9x9 and 13x13 max pools, stride 1; the 13x13 one's
        # argmax positions (as unpooling decoders keep them) are an output.
        pyramid, where = F.max_pool2d(h, 13, 1, 6, return_indices=True)
        h = h + F.max_pool2d(h, 9, 1, 4) * 0.5 + pyramid * 0.25
        peaks = F.adaptive_max_pool2d(h, 3)  # [n, c, 3, 3]
        # Regions of 7x5 elements (17 is no multiple of 3 or 5): its own fallback.
        regions = F.adaptive_avg_pool2d(h, (3, 5)).flatten(2).mean(2)
        avg = F.adaptive_avg_pool2d(h, 1).flatten(1) + regions
        h = h * torch.sigmoid(self.gate(avg) + self.gate(peaks.amax((2, 3))))[:, :, None, None]
        tokens = F.avg_pool2d(h, 6, 4).flatten(2).transpose(1, 2)  # [n, 9, c]
        scores = torch.baddbmm(
            self.position_bias, self.q(tokens), self.k(tokens).transpose(1, 2), alpha=c**-0.5
        )
        mixed = torch.bmm(scores.softmax(-1), tokens)  # [n, 9, c]
        return self.fc(mixed.mean(1)), peaks, where


# --- detection-style post-processing: outputs sized by the data ----------------------


class DetectionHead(nn.Module):
    """A small detector's head and post-processing: per-anchor scores and boxes from
    convolutions, the anchors over a threshold (nonzero) with their scores
    (masked_select) and boxes, and the running best score along the anchors (cummax)."""

    def __init__(self, anchors: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU())
        self.score = nn.Conv2d(16, anchors, 1)
        self.box = nn.Conv2d(16, anchors * 4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        features = self.body(x)
        scores = torch.sigmoid(self.score(features)).flatten()
        boxes = self.box(features).permute(0, 2, 3, 1).reshape(-1, 4)
        keep = scores > 0.5
        anchors = torch.nonzero(keep)
        best, best_at = torch.cummax(scores, 0)
        kept = torch.masked_select(boxes, keep[:, None]).reshape(-1, 4)
        return anchors, torch.masked_select(scores, keep), kept, best, best_at


# --- video: 3-D convolutions ----------------------------------------------------------


class VideoNet(nn.Module):
    """A small video classifier with a segmentation-style head: a 3-D stem, an R(2+1)D
    block (spatial 1x3x3 then temporal 3x1x1 convolutions), a depthwise 3-D convolution,
    a transposed 3-D convolution back up (output padding beyond its padding), and global
    3-D pooling into a classifier, and a spatial-transformer warp of the features (a learned
    3-D affine grid sampled trilinearly with border padding: grid_sampler_3d). Its input is
    channels_last_3d: at batch 1 ATen runs the stem on its slow 3-D kernel, whose contiguous
    output the blob is compiled against."""

    def __init__(self, c: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, c, 3, (1, 2, 2), 1, bias=False), nn.BatchNorm3d(c), nn.ReLU()
        )
        self.spatial = nn.Conv3d(c, 2 * c, (1, 3, 3), 1, (0, 1, 1))
        self.temporal = nn.Conv3d(2 * c, 2 * c, (3, 1, 1), 1, (1, 0, 0))
        self.depthwise = nn.Conv3d(2 * c, 2 * c, 3, 2, 1, groups=2 * c)
        self.up = nn.ConvTranspose3d(2 * c, c, 2, 2, 0, output_padding=(0, 1, 1), dilation=2)
        self.fc = nn.Linear(3 * c, classes)
        # Near the identity: a slight rotation, scale and shift.
        theta = torch.eye(3, 4) + 0.1 * torch.randn(3, 4)
        self.theta = nn.Parameter(theta.unsqueeze(0))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.stem(x)
        grid = F.affine_grid(self.theta.expand(h.shape[0], 3, 4), list(h.shape), False)
        h = h + F.grid_sample(h, grid, "bilinear", "border", align_corners=False)
        h = F.relu(self.temporal(F.relu(self.spatial(h))) + h.repeat(1, 2, 1, 1, 1))
        d = F.relu(self.depthwise(h))
        up = self.up(d)
        # 3-D pools with windows over 25 elements (Inductor's fallbacks): a 3x3x3 max with
        # stride 1 and its argmax positions, a 3x3x3 average with stride 2, adaptive max
        # and average pools.
        peaks, where = F.max_pool3d(h, 3, 1, 1, return_indices=True)
        h = h + peaks
        half = h.shape[1] // 2
        coarse, coarse_at = F.adaptive_max_pool3d(h, (1, 2, 2), return_indices=True)
        regions = F.adaptive_avg_pool3d(h, (2, 4, 4)).mean((2, 3, 4))
        pooled = torch.cat(
            [coarse.flatten(1)[:, :half] + F.avg_pool3d(h, 3, 2, 1).mean((2, 3, 4))[:, :half],
             F.adaptive_avg_pool3d(d, 1).flatten(1) + regions],
            1,
        )  # fmt: skip
        return self.fc(pooled), up, where, coarse_at


# --- resizing inside the model: antialiased interpolation ------------------------------


class ImageResize(nn.Module):
    """Resizing inside a model, as a preprocessing head or a multi-scale branch does: an
    antialiased bicubic downscale (what torchvision's Resize does to tensors) into a small
    CNN, an antialiased bilinear upscale (align_corners) of its features back to the input's
    size, and an antialiased half-size copy of them. No torch has a C shim for antialiased
    resizing: compile rewrites it into matrix products (shimkit.aot.antialias)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, 3, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        small = F.interpolate(x, size=(24, 20), mode="bicubic", antialias=True)
        h = F.relu(self.conv1(small))
        back = F.interpolate(
            self.conv2(h), size=x.shape[-2:], mode="bilinear", align_corners=True, antialias=True
        )
        half = F.interpolate(h, scale_factor=0.5, mode="bilinear", antialias=True)
        return x + back, half


# --- audio: spectrograms and Fourier mixing --------------------------------------------


class AudioNet(nn.Module):
    """A keyword-spotting net over raw audio: a centred STFT (Hann window, reflect-padded),
    its power through a mel filterbank and a log, a conv1d stack, FNet-style token mixing
    (the real part of a 2-D FFT over time and channels) and a GRU; a second output filters
    the signal in the frequency domain (rfft, a learned complex response built with
    torch.polar, irfft). Every Fourier transform and complex value is rewritten by compile
    into real arithmetic (shimkit.aot.fft): the slim shims have no complex dtypes."""

    def __init__(self, n_fft: int = 128, mels: int = 24, c: int = 32, words: int = 10) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, n_fft // 4
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("mel", torch.rand(n_fft // 2 + 1, mels) / n_fft)
        self.conv = nn.Sequential(
            nn.Conv1d(mels, c, 5, padding=2), nn.ReLU(), nn.Conv1d(c, c, 3, padding=1)
        )
        self.norm = nn.LayerNorm(c)
        self.gru = nn.GRU(c, c, batch_first=True)
        self.head = nn.Linear(c, words)
        self.gain = nn.Parameter(torch.rand(65))
        self.phase = nn.Parameter(torch.randn(65) * 0.1)

    def forward(self, wav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        spec = torch.stft(
            wav, self.n_fft, self.hop, window=self.window, return_complex=True
        )  # [B, n_fft / 2 + 1, frames], complex
        power = spec.abs().pow(2).transpose(1, 2)  # [B, frames, bins]
        features = torch.log(power @ self.mel + 1e-6).transpose(1, 2)
        h = self.conv(features).transpose(1, 2)  # [B, frames, c]
        h = self.norm(h + torch.fft.fft2(h).real * 0.05)  # FNet mixing
        out, _ = self.gru(h)
        logits = self.head(out[:, -1])
        response = torch.polar(self.gain, self.phase)
        filtered = torch.fft.irfft(torch.fft.rfft(wav[:, :128]) * response, n=128)
        return logits, filtered


# --- counting: histograms of the data, sized by it ------------------------------------


class TokenCounts(nn.Module):
    """Bag-of-words features: how often each token occurs (torch.bincount; its length is the
    largest token + 1, read from the data), weighted by a learned score per token, the
    counts normalised into frequencies, and the distinct tokens with each token's place
    among them and their counts (torch.unique; as many as the data has), and the distinct
    bigrams with their counts (torch.unique along dim 0 of the token pairs). In compile's
    math form (shimkit.aot.counting)."""

    def __init__(self, vocab: int = 48) -> None:
        super().__init__()
        self.score = nn.Embedding(vocab, 1)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        weights = torch.sigmoid(self.score(tokens)).squeeze(-1)
        counts = torch.bincount(tokens)
        weighted = torch.bincount(tokens, weights, minlength=8)
        distinct, place, times = torch.unique(tokens, return_inverse=True, return_counts=True)
        pairs = torch.stack([tokens[:-1], tokens[1:]], dim=1)
        bigrams, bigram_counts = torch.unique(pairs, dim=0, return_counts=True)
        frequencies = counts.float() / tokens.numel()
        return counts, weighted * 2, frequencies, distinct, place, times, bigrams, bigram_counts


# --- reduced precision --------------------------------------------------------------


class ReducedPrecision(nn.Module):
    """A bfloat16 MLP and a float16 convolution inside a float32 model."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to(torch.bfloat16)
        self.conv = nn.Conv2d(3, 4, 3, padding=1).to(torch.float16)

    def forward(self, x: torch.Tensor, img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.mlp(x.to(torch.bfloat16)).float()
        z = self.conv(img.to(torch.float16)).float()
        return y, z


# --- dynamic batch --------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# --- Vision transformer, conformer convolution, mixture of experts ---------


class VisionTransformer(nn.Module):
    """ViT: a patchifying convolution, a class token and learned positions, a pre-norm
    encoder with GELU, the class token's features classified."""

    def __init__(
        self, d: int = 64, heads: int = 4, layers: int = 2, patch: int = 8, image: int = 32
    ) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        cls = self.cls.expand(tokens.shape[0], -1, -1)
        tokens = torch.cat([cls, tokens], 1) + self.pos
        return self.head(self.ln(self.encoder(tokens))[:, 0])


class ConformerConv(nn.Module):
    """A conformer's convolution module and half-step feed-forward: pointwise convolution
    and GLU, a depthwise 1-D convolution, batch norm, SiLU."""

    def __init__(self, d: int = 64, kernel: int = 15) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pointwise_in = nn.Conv1d(d, 2 * d, 1)
        self.depthwise = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pointwise_out = nn.Conv1d(d, d, 1)
        self.ff = nn.Sequential(
            nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [batch, time, d]
        y = F.glu(self.pointwise_in(self.ln(x).transpose(1, 2)), dim=1)
        y = self.pointwise_out(F.silu(self.bn(self.depthwise(y))))
        x = x + y.transpose(1, 2)
        return x + 0.5 * self.ff(x)


class MixtureOfExperts(nn.Module):
    """Top-k routing: a softmax gate picks k experts per token, their weights are gathered
    and applied as batched products, the outputs mixed by the renormalised gate."""

    def __init__(self, d: int = 32, experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.k = k
        self.w_in = nn.Parameter(torch.randn(experts, d, 2 * d) * 0.1)
        self.w_out = nn.Parameter(torch.randn(experts, 2 * d, d) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [tokens, d]
        weights, chosen = torch.topk(self.gate(x).softmax(-1), self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        hidden = F.gelu(torch.einsum("nd,nkdh->nkh", x, self.w_in[chosen]))
        out = torch.einsum("nkh,nkhd->nkd", hidden, self.w_out[chosen])
        return (out * weights.unsqueeze(-1)).sum(1)


class SamplingHead(nn.Module):
    """A language model's last steps before sampling: the hidden state, mixed with a max-pooled
    bag of the context's token embeddings (`nn.EmbeddingBag(mode="max")` over a 2-D input),
    to logits over a vocabulary longer than Inductor's own sort (512), then the top-k tokens
    (values and ids) and their tempered probabilities, and for top-p sampling the whole
    vocabulary sorted and its probability mass accumulated (the first 100 tokens returned)."""

    def __init__(self, vocab: int = 2000, d: int = 32, k: int = 40) -> None:
        super().__init__()
        self.context = nn.EmbeddingBag(vocab, d, mode="max")
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.k = k

    def forward(self, hidden: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = self.head(self.norm(hidden + self.context(context)))  # [B, vocab]
        top, tokens = torch.topk(logits, self.k, dim=-1)
        # Stable: tied logits keep one order on every device (eager's unstable sort does not).
        ordered, order = torch.sort(logits, dim=-1, descending=True, stable=True)
        mass = ordered.softmax(-1).cumsum(-1)
        return torch.softmax(top / 0.8, dim=-1), tokens, mass[:, :100], order[:, :100]


class PoseHead(nn.Module):
    """Keypoints regressed from features, then linear algebra on the data, as pose and
    tracking heads do it: each sample's camera matrix inverted to back-project the points,
    their covariance's Cholesky factor and log-determinant, a solve against it (a
    Mahalanobis-style weight), and the determinant of a rotation-like 3x3."""

    def __init__(self, features: int = 30, points: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, points * 3))
        self.points = points

    def forward(self, x: torch.Tensor, camera: torch.Tensor) -> tuple[torch.Tensor, ...]:
        points = self.net(x).view(-1, self.points, 3)
        rays = (torch.linalg.inv(camera) @ points.mT).mT
        centred = rays - rays.mean(1, keepdim=True)
        cov = centred.mT @ centred / self.points + 0.1 * torch.eye(3, device=x.device)
        weights = torch.linalg.solve(cov, centred.mT).mT
        spread = torch.linalg.slogdet(cov)[1]
        return rays, torch.linalg.cholesky(cov), weights, spread, torch.linalg.det(camera)


class Geometry(nn.Module):
    """Linear algebra on what a network regresses, as geometry heads do it: a homography by
    DLT from four correspondences (the right singular vector of the 8x9 system's smallest
    singular value, so a full SVD), a rotation from a 6-D head (the Q of a 3x2 QR), a
    complete QR of 12x5 features, and whitening by the eigenvectors of an 8x8 covariance.
    Outputs free of the factorizations' sign choices: the homography scaled to h33 = 1, |R|
    and the whitened features' magnitudes."""

    def __init__(self, features: int = 32) -> None:
        super().__init__()
        self.correspondences = nn.Linear(features, 16)
        self.rotation = nn.Linear(features, 6)
        self.frames = nn.Linear(features, 60)
        self.samples = nn.Linear(features, 16 * 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        px, py, u, v = self.correspondences(x).view(-1, 4, 4).unbind(-1)
        one, zero = torch.ones_like(px), torch.zeros_like(px)
        upper = torch.stack([-px, -py, -one, zero, zero, zero, u * px, u * py, u], -1)
        lower = torch.stack([zero, zero, zero, -px, -py, -one, v * px, v * py, v], -1)
        _, _, vh = torch.linalg.svd(torch.cat([upper, lower], -2))
        homography = vh[..., -1, :].view(-1, 3, 3)
        homography = homography / homography[..., 2:, 2:]
        rotation, _ = torch.linalg.qr(self.rotation(x).view(-1, 3, 2))
        frame, triangle = torch.linalg.qr(self.frames(x).view(-1, 12, 5), mode="complete")
        samples = self.samples(x).view(-1, 16, 8)
        samples = samples - samples.mean(1, keepdim=True)
        cov = samples.mT @ samples / 15 + 0.1 * torch.eye(8, device=x.device)
        values, vectors = torch.linalg.eigh(cov)
        white = samples @ vectors / values.sqrt().unsqueeze(-2)
        return homography, rotation, frame[..., :5], triangle.abs(), values, white.abs()


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _resnet() -> ZooModel:
    _seeded(1)
    return ZooModel(
        ResNet(widths=(8, 16, 32, 64), blocks=1, classes=10).eval(), (_randn(2, 3, 32, 32),)
    )


def _mobilenet() -> ZooModel:
    _seeded(2)
    setting = ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2))
    # A channels_last input: the nhwc path from the first convolution on.
    return ZooModel(
        MobileNetV2(setting, stem=8, last=64, classes=10).eval(),
        (_randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last),),
    )


def _unet() -> ZooModel:
    _seeded(15)
    return ZooModel(TinyUNet().eval(), (_randn(2, 3, 16, 16),))


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


def _sdpa_masks() -> ZooModel:
    _seeded(6)
    keep = torch.rand(2, 1, 12, 12) > 0.3
    keep[..., 0] = True  # every row attends somewhere
    return ZooModel(MaskedAttention().eval(), (_randn(2, 12, 32), keep, _randn(2, 4, 12, 12)))


def _recurrent() -> ZooModel:
    _seeded(8)
    return ZooModel(Recurrent().eval(), (_randn(3, 7, 16),))


def _recommender() -> ZooModel:
    _seeded(11)
    b, per = 4, 3
    history = torch.randint(0, 50, (b * per,))
    offsets = torch.arange(0, b * per, per)
    return ZooModel(
        Recommender().eval(), (torch.randint(0, 20, (b,)), history, offsets, torch.rand(b * per))
    )


def _dynamic_mlp() -> ZooModel:
    _seeded(12)
    batch = torch.export.Dim("batch", min=1, max=256)
    return ZooModel(
        MLP().eval(),
        (_randn(4, 16),),
        dynamic_shapes=({0: batch},),
        more_inputs=[(_randn(2, 16),), (_randn(200, 16),)],
    )


def _index_ops() -> ZooModel:
    _seeded(13)
    idx = torch.tensor([[0, 2, 2], [5, 5, 1], [3, 0, 3], [4, 4, 4]])
    return ZooModel(IndexOps().eval(), (_randn(4, 8), idx, torch.tensor([1, 3, 1])))


def _reduced_precision() -> ZooModel:
    _seeded(14)
    # bfloat16 and float16 inside: ~3 significant digits.
    return ZooModel(ReducedPrecision().eval(), (_randn(3, 16), _randn(2, 3, 8, 8)), rtol=2e-2)


# Models for bench/bench_models.py only (not compiled by the test suite): full-size networks
# and the geometry head (its linear algebra forms have their own tests in tests/aot).


def _resnet18() -> ZooModel:
    _seeded(20)
    return ZooModel(ResNet().eval(), (_randn(1, 3, 224, 224),))


def _mobilenet_v2_full() -> ZooModel:
    _seeded(21)
    return ZooModel(MobileNetV2().eval(), (_randn(1, 3, 224, 224),))


def _pooling() -> ZooModel:
    _seeded(23)
    return ZooModel(PoolingNet().eval(), (_randn(2, 3, 34, 34),))


def _detection() -> ZooModel:
    _seeded(24)
    return ZooModel(
        DetectionHead().eval(), (_randn(1, 3, 16, 16),), more_inputs=[(_randn(1, 3, 16, 16) * 3,)]
    )


def _video() -> ZooModel:
    _seeded(25)
    clip = _randn(1, 3, 6, 12, 12).contiguous(memory_format=torch.channels_last_3d)
    return ZooModel(VideoNet().eval(), (clip,))


def _image_resize() -> ZooModel:
    _seeded(26)
    batch = torch.export.Dim("batch", min=1, max=64)
    return ZooModel(
        ImageResize().eval(),
        (_randn(2, 3, 50, 37),),
        dynamic_shapes=({0: batch},),
        more_inputs=[(_randn(3, 3, 50, 37),)],
    )


def _audio() -> ZooModel:
    _seeded(27)
    return ZooModel(AudioNet().eval(), (_randn(2, 2000),), more_inputs=[(_randn(2, 2000),)])


def _counting() -> ZooModel:
    _seeded(28)
    tokens = torch.tensor([3, 1, 3, 12, 0, 5, 5, 5, 2, 40])
    other_data = [(torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2, 0]),), (torch.randint(0, 48, (10,)),)]
    return ZooModel(TokenCounts().eval(), (tokens,), more_inputs=other_data)


def _vision_transformer() -> ZooModel:
    _seeded(29)
    return ZooModel(VisionTransformer().eval(), (_randn(2, 3, 32, 32),))


def _conformer() -> ZooModel:
    _seeded(30)
    return ZooModel(ConformerConv().eval(), (_randn(2, 50, 64),))


def _mixture_of_experts() -> ZooModel:
    _seeded(31)
    return ZooModel(MixtureOfExperts().eval(), (_randn(16, 32),))


def _sampling_head() -> ZooModel:
    _seeded(32)
    batch = torch.export.Dim("batch", min=1, max=64)

    def inputs(b: int) -> tuple[torch.Tensor, ...]:
        return _randn(b, 32), torch.randint(0, 2000, (b, 6))

    return ZooModel(
        SamplingHead().eval(), inputs(3), ({0: batch}, {0: batch}), more_inputs=[inputs(5)]
    )


def _pose_head() -> ZooModel:
    _seeded(33)
    batch = torch.export.Dim("batch", min=2, max=64)
    intrinsics = torch.tensor([[50.0, 0.0, 16.0], [0.0, 48.0, 12.0], [0.0, 0.0, 1.0]])

    def inputs(b: int) -> tuple[torch.Tensor, ...]:
        return _randn(b, 30), intrinsics + 0.5 * _randn(b, 3, 3)

    return ZooModel(PoseHead().eval(), inputs(4), ({0: batch}, {0: batch}), more_inputs=[inputs(7)])


def _transformer_block() -> ZooModel:
    _seeded(22)
    return ZooModel(Block(256, 8, 8).eval(), (_randn(1, 128, 256),))


def _geometry() -> ZooModel:
    _seeded(34)
    return ZooModel(Geometry().eval(), (_randn(16, 32),))


ZOO: dict[str, Callable[[], ZooModel]] = {
    "resnet": _resnet,
    "mobilenet_v2": _mobilenet,
    "unet": _unet,
    "transformer_encoder": _encoder,
    "gpt": _gpt,
    "gpt_gqa": _gpt_gqa,
    "sdpa_masks": _sdpa_masks,
    "recurrent": _recurrent,
    "recommender": _recommender,
    "index_ops": _index_ops,
    "reduced_precision": _reduced_precision,
    "dynamic_mlp": _dynamic_mlp,
    "pooling": _pooling,
    "detection": _detection,
    "video": _video,
    "image_resize": _image_resize,
    "audio": _audio,
    "counting": _counting,
    "vision_transformer": _vision_transformer,
    "conformer": _conformer,
    "mixture_of_experts": _mixture_of_experts,
    "sampling_head": _sampling_head,
    "pose_head": _pose_head,
    "resnet18": _resnet18,
    "mobilenet_v2_full": _mobilenet_v2_full,
    "transformer_block": _transformer_block,
    "geometry": _geometry,
}
# What the test suite compiles (the rest are bench/bench_models.py's own models).
SUITE = list(ZOO)[: list(ZOO).index("resnet18")]
