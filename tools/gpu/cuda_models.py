"""The models the GPU experiment compiles, with their example inputs.

ResNet-18 and MobileNetV3-small come from torchvision and the 2-layer BERT from
transformers when those are installed (the H200 image has both), else from the
compact definitions below (same architectures); `source` says which was used. The
LSTM, MLP, GPT-2-like decoder, TransformerEncoder, a float16 conv net and a model of
embedding/index/sort/topk/cumsum/argmax with int64 and bool tensors are defined here.
"""

from __future__ import annotations

from typing import Any

MODELS = (
    "resnet18",
    "mobilenet_v3_small",
    "bert2",
    "lstm",
    "mlp",
    "gpt2",
    "transformer_encoder",
    "convnet_fp16",
    "ops_coverage",
)
# The five models of issue 11's CUDA table (replay target <= 0.5x of torch's runner).
ISSUE_MODELS = ("resnet18", "mobilenet_v3_small", "bert2", "lstm", "mlp")
CONV_MODELS = ("resnet18", "mobilenet_v3_small")
# Coverage beyond the issue's table, measured last (budget permitting).
EXTRA_MODELS = ("convnet_fp16", "ops_coverage")


def _resnet18(torch: Any) -> Any:
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))  # fmt: skip

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1)]  # fmt: skip
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def _mobilenet_v3_small(torch: Any) -> Any:
    nn = torch.nn

    def conv(cin: int, cout: int, k: int, s: int, groups: int = 1, act: Any = None) -> Any:
        parts = [
            nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        return nn.Sequential(*parts, *([act()] if act else []))

    class Squeeze(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            mid = max(8, (c // 4 + 4) // 8 * 8)
            self.fc1, self.fc2 = nn.Conv2d(c, mid, 1), nn.Conv2d(mid, c, 1)

        def forward(self, x: Any) -> Any:
            s = torch.nn.functional.adaptive_avg_pool2d(x, 1)
            return x * torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))

    class Inverted(nn.Module):
        def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, act: Any, s: int):
            super().__init__()
            parts = [] if exp == cin else [conv(cin, exp, 1, 1, act=act)]
            parts += [conv(exp, exp, k, s, groups=exp, act=act)]
            parts += [Squeeze(exp)] if se else []
            parts += [conv(exp, cout, 1, 1)]
            self.body = nn.Sequential(*parts)
            self.residual = s == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.residual else self.body(x)

    hs, re = nn.Hardswish, nn.ReLU
    spec = [(16, 3, 16, 16, True, re, 2), (16, 3, 72, 24, False, re, 2),
            (24, 3, 88, 24, False, re, 1), (24, 5, 96, 40, True, hs, 2),
            (40, 5, 240, 40, True, hs, 1), (40, 5, 240, 40, True, hs, 1),
            (40, 5, 120, 48, True, hs, 1), (48, 5, 144, 48, True, hs, 1),
            (48, 5, 288, 96, True, hs, 2), (96, 5, 576, 96, True, hs, 1),
            (96, 5, 576, 96, True, hs, 1)]  # fmt: skip
    return nn.Sequential(
        conv(3, 16, 3, 2, act=hs), *[Inverted(*row) for row in spec], conv(96, 576, 1, 1, act=hs),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(576, 1024), hs(), nn.Linear(1024, 1000),
    )  # fmt: skip


class _Outputs:
    """Wraps a transformers model so that it returns plain tensors."""

    @staticmethod
    def bert(torch: Any, bert: Any) -> Any:
        class Bert(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.bert = bert

            def forward(self, ids: Any) -> Any:
                out = self.bert(input_ids=ids)
                return out.last_hidden_state, out.pooler_output

        return Bert()


def _bert_like(torch: Any, vocab: int, dim: int, heads: int, layers: int, seq: int) -> Any:
    """BERT's shape without transformers: embeddings, post-norm GELU encoder layers, pooler."""
    nn = torch.nn

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words, self.positions = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.norm = nn.LayerNorm(dim)
            layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, 0.0, "gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.pool = nn.Linear(dim, dim)

        def forward(self, ids: Any) -> Any:
            x = self.words(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
            h = self.encoder(self.norm(x))
            return h, torch.tanh(self.pool(h[:, 0]))

    return Bert()


def _gpt2_like(torch: Any, vocab: int, dim: int, heads: int, layers: int, seq: int) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU("tanh"),
                                     nn.Linear(4 * dim, dim))  # fmt: skip

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).unbind(2)
            a = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(dim)

        def forward(self, ids: Any) -> Any:
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.ln(x) @ self.wte.weight.t()

    return Gpt()


def build(name: str, device: str) -> tuple[Any, tuple[Any, ...], str]:
    """(model in eval mode on `device`, example inputs, where the definition came from)."""
    import torch

    torch.manual_seed(0)
    source = "tools/gpu/cuda_models.py"
    if name == "resnet18":
        try:
            import torchvision

            model, source = torchvision.models.resnet18(weights=None), "torchvision"
        except ImportError:
            model = _resnet18(torch)
        inputs: tuple[Any, ...] = (torch.randn(1, 3, 224, 224),)
    elif name == "mobilenet_v3_small":
        try:
            import torchvision

            model, source = torchvision.models.mobilenet_v3_small(weights=None), "torchvision"
        except ImportError:
            model = _mobilenet_v3_small(torch)
        inputs = (torch.randn(1, 3, 224, 224),)
    elif name == "bert2":
        try:
            import transformers

            config = transformers.BertConfig(num_hidden_layers=2)
            model = _Outputs.bert(torch, transformers.BertModel(config))
            source = f"transformers {transformers.__version__}"
        except ImportError:
            model = _bert_like(torch, 30522, 768, 12, 2, 128)
        inputs = (torch.randint(0, 30522, (1, 128)),)
    elif name == "lstm":

        class Lstm(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
                self.head = torch.nn.Linear(256, 10)

            def forward(self, x: Any) -> Any:
                return self.head(self.lstm(x)[0][:, -1])

        model, inputs = Lstm(), (torch.randn(8, 50, 128),)
    elif name == "mlp":
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
            torch.nn.ReLU(), torch.nn.Linear(512, 10),
        )  # fmt: skip
        inputs = (torch.randn(8, 256),)
    elif name == "gpt2":
        model, inputs = (
            _gpt2_like(torch, 50257, 768, 12, 2, 1024),
            (torch.randint(0, 50257, (1, 128)),),
        )
    elif name == "convnet_fp16":
        # float16 convolutions (cuDNN) and GEMMs (cuBLASLt): the half-precision paths.
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10),
        ).half()  # fmt: skip
        inputs = (torch.randn(4, 3, 32, 32).half(),)
    elif name == "ops_coverage":
        # The ops issue 11 lists beside attention (embedding, index, sort, topk, cumsum,
        # argmax; int64 and bool tensors): which become Triton kernels, which fall back to
        # a shim (compile_ops_coverage.json names any the slim CUDA shims lack).
        class Ops(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embedding = torch.nn.Embedding(100, 16)

            def forward(self, x: Any, ids: Any) -> Any:
                values, indices = torch.topk(x, 5, dim=1)
                ordered, order = torch.sort(x, dim=1, stable=True)
                positive = x > 0
                return (
                    values, indices, ordered, order, torch.cumsum(x, dim=1),
                    torch.argmax(x, dim=1), x.index_select(1, ids), self.embedding(ids),
                    torch.where(positive, x, torch.zeros_like(x)), positive.sum(dim=1),
                )  # fmt: skip

        model, inputs = Ops(), (torch.randn(8, 64), torch.randint(0, 64, (10,)))
    elif name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, 0.0, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        inputs = (torch.randn(4, 64, 512),)
    else:
        raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")
    model = model.eval().to(device)
    return model, tuple(t.to(device) for t in inputs), source


def eager(model: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """Reference outputs in full fp32 (no TF32 in cuBLAS or cuDNN), on the CPU."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.detach().cpu() for o in outs]
