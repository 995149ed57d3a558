"""Real-model families on the slim CPU runtime, next to libtorch, against eager PyTorch.

Each model of tests/models/zoo.py (ResNet-style, MobileNetV2-style, U-Net-style with
transposed convolutions, transformer encoder, GPT with causal SDPA and embeddings, GQA,
masked SDPA, LSTM/GRU, an embedding-bag recommender, index/scan/search ops,
bfloat16/float16 layers, dynamic batch, large-window pooling with baddbmm attention,
detection post-processing with outputs sized by the data, 3-D video layers, antialiased
resizing, an STFT audio net, token counts sized by the data, a vision transformer, a
conformer convolution module, top-k mixture of experts, a sampling head with a top-k and a
sort over a vocabulary and a max embedding bag) is compiled
with `shimkit compile`'s API, loaded with shimkit.runtime and compared with eager
PyTorch: float32 outputs within 1e-4 of the output's scale, integer outputs exactly.
Every family must also import the fallback shims it is here to exercise, so a suite
that silently stopped covering one fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import shimkit.runtime as rt
import torch
from shimkit.errors import ShimkitError

from tests.models.zoo import SUITE

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:index_reduce")]

# The float32 models' tolerance (each zoo model carries its own: ZooModel.rtol).
RTOL = 1e-4

# The fallback shims (unprefixed names) each family's blob must import.
FAMILY_SHIMS = {
    "resnet": ["aoti_torch_cpu_convolution", "aoti_torch_cpu_addmm_out"],
    "mobilenet_v2": ["aoti_torch_cpu_convolution"],
    "unet": ["aoti_torch_cpu_convolution"],  # transposed ones too
    "transformer_encoder": ["aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu"],
    "gpt": ["aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu", "aoti_torch_check"],
    "gpt_gqa": ["aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu"],
    "sdpa_masks": ["aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu"],
    "recurrent": ["aoti_torch_cpu_mkldnn_rnn_layer", "aoti_torch_cpu_mm_out"],
    "recommender": [
        "aoti_torch_cpu__embedding_bag",
        "aoti_torch_cpu_cumsum",
        "aoti_torch_cpu_sort_stable",
        "aoti_torch_check",
        "aoti_torch_cpu__cdist_forward",
    ],
    "index_ops": [
        "aoti_torch_cpu_scatter_reduce_two_out",
        "aoti_torch_cpu_index_reduce",
        "aoti_torch_cpu_cumprod",
        "aoti_torch_cpu_logcumsumexp",
        "aoti_torch_cpu_searchsorted_Tensor",
        "aoti_torch_cpu_bucketize_Tensor",
        "aoti_torch_cpu_topk",
        "aoti_torch_cpu_kthvalue",
        "aoti_torch_cpu_mode",
        "aoti_torch_cpu_median",
        "aoti_torch_cpu_nanmedian",
        "aoti_torch_cpu_histc",
    ],
    "reduced_precision": ["aoti_torch_cpu_addmm_out", "aoti_torch_cpu_convolution"],
    "dynamic_mlp": ["aoti_torch_cpu_addmm_out"],
    "pooling": [
        "aoti_torch_cpu_avg_pool2d",
        "aoti_torch_cpu_adaptive_max_pool2d",
        "aoti_torch_cpu__adaptive_avg_pool2d",
        "aoti_torch_cpu_baddbmm_out",
    ],
    "detection": [
        "aoti_torch_cpu_nonzero",
        "aoti_torch_cpu_masked_select",
        "aoti_torch_cpu_cummax",
    ],
    "video": [
        "aoti_torch_cpu_convolution",  # 3-D, plain and transposed
        "aoti_torch_cpu_avg_pool3d",
        "aoti_torch_cpu__adaptive_avg_pool3d",
        "aoti_torch_cpu_grid_sampler_3d",
    ],
    # Antialiased resizing becomes matrix products (compile's math form); the CNN convolves.
    "image_resize": ["aoti_torch_cpu_convolution"],
    # FFTs become matrix products and complex values real pairs (compile's math form);
    # Inductor writes the GRU's steps itself (mkldnn_rnn_layer is LSTM's).
    "audio": ["aoti_torch_cpu_convolution", "aoti_torch_cpu_mm_out"],
    # bincount's length is read from the data, unique's from a nonzero (math forms).
    "counting": ["aoti_torch_item_int64", "aoti_torch_cpu_nonzero"],
    "vision_transformer": [
        "aoti_torch_cpu_convolution",
        "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu",
    ],
    "conformer": ["aoti_torch_cpu_convolution"],  # grouped (depthwise) 1-D ones too
    "mixture_of_experts": ["aoti_torch_cpu_topk"],
    "sampling_head": [
        "aoti_torch_cpu_topk",
        "aoti_torch_cpu__embedding_bag",
        "aoti_torch_cpu_sort_stable",
    ],
    # inv, solve, slogdet, cholesky and det have no C shim: compile's math form (LU and
    # Cholesky steps Inductor generates); the batched products are bmm's.
    "pose_head": ["aoti_torch_cpu_addmm_out", "aoti_torch_cpu_bmm_out"],
}


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def mismatches(got: list[np.ndarray], want: list[torch.Tensor], rtol: float) -> list[str]:
    """Why `got` differs from `want` (empty if it does not): floats within rtol of the
    output's largest magnitude, everything else exactly; shapes and dtypes equal."""
    problems = []
    if len(got) != len(want):
        return [f"{len(got)} outputs, eager has {len(want)}"]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        w_np = w.detach().numpy()
        if g.shape != w_np.shape or g.dtype != w_np.dtype:
            problems.append(f"output {i}: {g.dtype}{list(g.shape)} vs {w_np.dtype}{list(w.shape)}")
        elif w_np.dtype.kind == "f":
            scale = float(np.max(np.abs(w_np))) if w_np.size else 0.0
            err = float(np.max(np.abs(g.astype(np.float64) - w_np))) if w_np.size else 0.0
            if not err <= rtol * max(scale, 1e-12):
                problems.append(f"output {i}: max error {err:.3g} > {rtol} x scale {scale:.3g}")
        elif not np.array_equal(g, w_np):
            problems.append(f"output {i}: {int(np.sum(g != w_np))} elements differ")
    return problems


def run_and_compare(model: rt.Model, eager: Any, inputs: tuple[Any, ...], rtol: float) -> None:
    with torch.no_grad():
        want = _as_list(eager(*inputs))
    got = model(*[t.numpy() for t in inputs])
    problems = mismatches(got, want, rtol)
    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("name", SUITE)
def test_family_imports_its_fallback_shims(packages: Any, config: Any, name: str) -> None:
    from shimkit.aot.pt2 import read_blobs
    from shimkit.elf import read_elf_names

    [(member, data)] = read_blobs(packages(name).prefixed).items()
    imports = set(read_elf_names(data, member).imports)
    missing = [s for s in FAMILY_SHIMS[name] if config.prefixed(s) not in imports]
    assert not missing, f"{name} no longer exercises {missing}"


@pytest.mark.parametrize("name", SUITE)
def test_family_matches_eager_next_to_libtorch(packages: Any, name: str) -> None:
    import sys

    assert "torch" in sys.modules  # the same process as torch, libtorch in global scope
    package = packages(name)
    with rt.load(package.prefixed) as model:
        for inputs in [package.inputs, *package.more_inputs]:
            run_and_compare(model, package.model, inputs, package.rtol)


def test_channels_last_input_is_laid_out_as_the_blob_was_compiled(packages: Any) -> None:
    """The video model was exported with a channels_last_3d clip, and its first kernel
    reads the input with those strides: the runtime passes any array in that layout.
    Control: passed row-major as it comes (what the runtime did before), the numbers are
    wrong."""
    package = packages("video")
    clip = package.inputs[0]
    row_major = np.ascontiguousarray(clip.numpy())
    with torch.no_grad():
        want = _as_list(package.model(clip))
    with rt.load(package.prefixed) as model:
        assert model.input_specs[0].order == (0, 2, 3, 4, 1)
        assert not mismatches(model(row_major), want, package.rtol)
        assert not mismatches(model(clip.numpy()), want, package.rtol)
        model._orders = {}  # the control: no layout step, no input check
        model._geometry = [None] * model.num_inputs
        assert mismatches(model(row_major), want, package.rtol)


def test_dynamic_batch_serves_other_sizes_and_refuses_out_of_range(packages: Any) -> None:
    package = packages("dynamic_mlp")
    with rt.load(package.prefixed) as model:
        for batch in (2, 3, 17, 256):
            run_and_compare(model, package.model, (torch.randn(batch, 16),), RTOL)
        # The export's range is [1, 256]; Inductor specialises 1 away. The runtime reads
        # the blob's range from its input checks and refuses 1 and 257 in one line before
        # the blob runs (the blob's own guard would refuse them too).
        for batch, why in ((1, "sizes of 2 and more"), (257, "export with a wider Dim")):
            with pytest.raises(ShimkitError, match=f"size {batch} at dim 0, .*2 to 256.*{why}"):
                model(np.zeros((batch, 16), np.float32))
        run_and_compare(model, package.model, (torch.randn(5, 16),), RTOL)  # still usable


@pytest.mark.parametrize("name", ["resnet", "mobilenet_v2", "unet"])
def test_packed_weights_alone_keep_matching_eager(packages: Any, name: str) -> None:
    # The convolution weights' packed copies stand in for the plain bytes after the
    # first run (their pages go back): later runs, on other inputs, use them alone.
    package = packages(name)
    with rt.load(package.prefixed) as model:
        assert model.stand_ins == len(model.source.stand_ins) > 0
        for seed in range(3):
            torch.manual_seed(seed)
            inputs = tuple(torch.randn_like(t) for t in package.inputs)
            run_and_compare(model, package.model, inputs, package.rtol)


_OUT_OF_VOCABULARY = """
import sys
import shimkit.runtime as rt
from tests.models.packages import compiled_pair
package = compiled_pair("gpt", unprefixed=False)
bad = package.inputs[0].clone()
bad[0, 3] = 97  # vocabulary is 0..96
rt.load(package.prefixed)(bad.numpy())
print("returned")
"""


def test_index_check_inside_a_kernel_stops_the_process_like_libtorch(
    packages: Any, repo_root: Any
) -> None:
    """aoti_torch_check fires in the blob's embedding kernel, inside an OpenMP parallel
    region: the exception cannot leave it, so the process ends (std::terminate) with the
    check's message, exactly as under libtorch's own shims. Checks outside parallel
    regions fail the run cleanly (tests/runtime/test_shim_families.py)."""
    import subprocess
    import sys

    packages("gpt")  # compiled here, so the child only loads it
    proc = subprocess.run(
        [sys.executable, "-c", _OUT_OF_VOCABULARY],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0 and "returned" not in proc.stdout
    assert "index out of bounds: 0 <= tmp" in proc.stderr, proc.stderr[-2000:]


def test_negative_control_comparison_catches_a_small_error(packages: Any) -> None:
    """The 1e-4 comparison fails on a result that is off by 1e-3 of its scale."""
    package = packages("transformer_encoder")
    with torch.no_grad():
        want = _as_list(package.model(*package.inputs))
    with rt.load(package.prefixed) as model:
        got = model(*[t.numpy() for t in package.inputs])
    assert not mismatches(got, want, RTOL)
    scale = float(np.max(np.abs(got[0])))
    got[0].flat[7] += 1e-3 * scale
    assert mismatches(got, want, RTOL)
    assert mismatches([got[0].astype(np.float64)], want, RTOL)  # dtype differs
