"""The slim CUDA target's compile forms, all together, on real models, compiled and run on
the CPU.

For a slim CUDA blob `shimkit compile` rewrites the calls the slim CUDA shims would run on
the host (`in_math_form(..., slim_cuda=True)`). The forms are device-neutral, so the zoo
models they change are compiled here with all of them for the slim CPU runtime, run next
to libtorch and compared with eager as the real-model suite compares them: the forms
compose, Inductor compiles what they make, and the numbers are right. Each blob must import
none of the shims its forms replace (control: the suite's plain package of the same model
imports them, tests/models/test_model_suite.py's FAMILY_SHIMS). The device runs are in
docs/benchmarks.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import shimkit.runtime as rt
import torch

from tests.models.test_model_suite import FAMILY_SHIMS, run_and_compare

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:index_reduce")]

# The host-step shims (unprefixed) each model's CUDA forms replace.
REPLACED = {
    "recommender": ["aoti_torch_cpu__embedding_bag", "aoti_torch_cpu__cdist_forward"],
    "index_ops": [
        # Not scatter_reduce_two_out: Inductor's CPU backend sends sum scatters (the model's
        # scatter_add) there itself; on CUDA it adds atomically.
        "aoti_torch_cpu_index_reduce",
        "aoti_torch_cpu_topk",
        "aoti_torch_cpu_kthvalue",
        "aoti_torch_cpu_mode",
        "aoti_torch_cpu_median",
        "aoti_torch_cpu_nanmedian",
        "aoti_torch_cpu_histc",
    ],
    "pooling": [
        "aoti_torch_cpu_avg_pool2d",
        "aoti_torch_cpu_adaptive_max_pool2d",
        "aoti_torch_cpu__adaptive_avg_pool2d",
        "aoti_torch_cpu_baddbmm_out",
    ],
    "video": [
        "aoti_torch_cpu_avg_pool3d",
        "aoti_torch_cpu__adaptive_avg_pool3d",
        "aoti_torch_cpu_adaptive_max_pool3d",
    ],
    "mixture_of_experts": ["aoti_torch_cpu_topk"],
    # A top-k over 2000 logits (in rounds of sorts of 512), a max bag over 2-D input.
    "sampling_head": ["aoti_torch_cpu_topk", "aoti_torch_cpu__embedding_bag"],
}


def test_the_plain_packages_import_what_the_forms_replace() -> None:
    """Control: the suite's packages (CPU forms only) keep these shims, as far as its own
    list of each family's shims names them."""
    for name, replaced in REPLACED.items():
        named = set(FAMILY_SHIMS[name]) & set(replaced)
        assert named, f"{name}: the suite names none of {replaced}"


@pytest.mark.parametrize("name", sorted(REPLACED))
def test_cuda_forms_compile_run_and_match_eager(
    libs: Any, config: Any, tmp_path: Path, name: str
) -> None:
    from shimkit.aot.compile import compile_exported, in_math_form
    from shimkit.aot.pt2 import read_blobs
    from shimkit.elf import read_elf_names

    from tests.models.zoo import ZOO

    zoo = ZOO[name]()
    exported = torch.export.export(zoo.model, zoo.inputs, dynamic_shapes=zoo.dynamic_shapes)
    program, notes = in_math_form(torch, exported, False, False, slim_cuda=True)
    assert notes, f"{name}: no form applied"
    package = compile_exported(program, tmp_path / f"{name}.pt2", force=True, show_progress=False)
    [(member, data)] = read_blobs(package.path).items()
    imports = set(read_elf_names(data, member).imports)
    kept = [shim for shim in REPLACED[name] if config.prefixed(shim) in imports]
    assert not kept, f"{name} still imports {kept}"
    with rt.load(package.path) as model:
        for inputs in [zoo.inputs, *zoo.more_inputs]:
            run_and_compare(model, zoo.model, inputs, zoo.rtol)
