"""Attention compiled in its math form (`shimkit compile --decompose-attention`).

The slim CUDA shims have no fused attention fallback, so `shimkit compile --device cuda`
rewrites every scaled_dot_product_attention into matmuls, masks and a softmax before
Inductor sees the program (shimkit.aot.attention). Here, on the CPU: the rewrite matches
eager for causal, boolean and additive masks, explicit scales and grouped-query heads; a
compiled GPT then imports no attention shim (control: without the rewrite it imports
torch's fused CPU attention) and still computes what eager PyTorch computes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shimkit.config import ShimConfig
from shimkit.errors import ShimkitError

torch = pytest.importorskip("torch")
F = torch.nn.functional

HERE = Path(__file__).resolve().parent
GPT = HERE / "models" / "gpt_attention.py"


class Attention(torch.nn.Module):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q: Any, k: Any, v: Any, *mask: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


def qkv(heads: int = 4, kv_heads: int = 4) -> tuple[Any, Any, Any]:
    torch.manual_seed(1)
    return (
        torch.randn(2, heads, 8, 16),
        torch.randn(2, kv_heads, 8, 16),
        torch.randn(2, kv_heads, 8, 16),
    )


CASES: dict[str, tuple[dict[str, Any], tuple[Any, ...]]] = {
    "causal": ({"is_causal": True}, qkv()),
    "bool_mask": ({}, (*qkv(), torch.rand(8, 8) > 0.4)),
    "additive_mask_and_scale": ({"scale": 0.3}, (*qkv(), torch.randn(2, 1, 8, 8))),
    "gqa_causal": ({"is_causal": True, "enable_gqa": True}, qkv(heads=4, kv_heads=2)),
}


def attention_targets(exported: Any) -> list[str]:
    return [
        str(node.target)
        for node in exported.graph.nodes
        if node.op == "call_function" and "attention" in str(node.target)
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_math_form_matches_eager_and_holds_no_attention_op(case: str) -> None:
    from shimkit.aot.attention import decompose_attention

    kwargs, inputs = CASES[case]
    model = Attention(**kwargs)
    exported = torch.export.export(model, inputs)
    # Control: as exported, the program holds the op Inductor would keep as a fallback.
    assert attention_targets(exported) == ["aten.scaled_dot_product_attention.default"]
    rewritten, count = decompose_attention(torch, exported)
    assert count == 1 and attention_targets(rewritten) == []
    with torch.no_grad():
        torch.testing.assert_close(
            rewritten.module()(*inputs), model(*inputs), atol=1e-5, rtol=1e-5
        )


def test_program_without_attention_is_left_alone() -> None:
    from shimkit.aot.attention import decompose_attention

    exported = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert decompose_attention(torch, exported) == (exported, 0)


def test_attention_with_dropout_is_refused_in_one_line() -> None:
    from shimkit.aot.attention import decompose_attention

    exported = torch.export.export(Attention(dropout_p=0.1), qkv())
    with pytest.raises(ShimkitError, match=r"dropout_p=0\.1: export the model in eval mode"):
        decompose_attention(torch, exported)


def test_compile_for_cuda_without_a_cuda_torch_is_one_line(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this torch can compile for CUDA")
    out = tmp_path / "gpt.pt2"
    done = subprocess.run(
        [sys.executable, "-m", "shimkit", "compile", str(GPT), "-o", str(out), "--device", "cuda"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("shimkit: error: --device cuda: torch ")
    assert "CPU-only build" in lines[0] or "no usable GPU" in lines[0]
    assert not out.exists()


def blob_imports(package: Path) -> list[str]:
    from shimkit.aot.pt2 import read_blobs
    from shimkit.elf import read_elf

    [(member, data)] = read_blobs(package).items()
    return sorted(s.name for s in read_elf(data, member).imports)


@pytest.fixture(scope="module")
def gpt_packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from shimkit.cli import main

    work = tmp_path_factory.mktemp("attention")
    packages = {}
    for mode in ("--decompose-attention", "--no-decompose-attention"):
        packages[mode] = work / f"gpt{mode}.pt2"
        # Checked against (and run by) torch's runner: the slim CPU shims may lack ops of
        # this model other than attention.
        argv = ["compile", str(GPT), "-o", str(packages[mode]), mode, "--target", "libtorch"]
        assert main(argv) == 0
    return packages


@pytest.mark.slow
def test_compiled_gpt_imports_no_attention_shim_and_matches_eager(
    gpt_packages: dict[str, Path], config: ShimConfig
) -> None:
    from shimkit.aot.forward import build_forwarding_library
    from shimkit.header import find_torch, shim_names

    math_form = blob_imports(gpt_packages["--decompose-attention"])
    fused = blob_imports(gpt_packages["--no-decompose-attention"])
    # Control: left alone, the blob calls torch's fused CPU attention through a shim.
    assert config.prefixed("aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu") in fused
    assert not [name for name in math_form if "attention" in name]
    assert config.prefixed("aoti_torch_cpu_bmm_out") in math_form  # Q K^T and P V
    # Torch's runner (through the forwarding library) on the math-form blob: eager's numbers.
    forwarder = build_forwarding_library(shim_names(find_torch().include_dir), config)
    pair = f"{gpt_packages['--decompose-attention']}={GPT}"
    done = subprocess.run(
        [sys.executable, str(HERE / "run_packages.py"), str(forwarder), pair],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])[pair]
    assert result["ok"], result["detail"]
