"""GPU probe: does Inductor generate sorts and top-k over a long dim on CUDA itself, and how fast?

Newer torch has `torch._inductor.config.triton.decompose_sort_ops` (off by default), which lifts
Inductor's 512-element limit on its own sort kernel and lowers topk, kthvalue, mode and median
through it. shimkit's slim CUDA compile forms stop at that limit (a longer sort stays a host
step); this probe says whether the option would take over, per case: whether the compiled code
still calls ATen's op (a fallback) or not, whether the result equals eager's (values and
indices), and the time per call of each. Prints JSON; results in docs/benchmarks.md.

    python3 tools/gpu/probe_long_sorts.py > OUT.json
"""

import json

import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code


def per_call_us(fn, x, reps: int = 50) -> float:
    fn(x)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn(x)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / reps


CASES = {
    "sort_4x4096": ((4, 4096), lambda x: torch.sort(x, dim=-1, stable=True)),
    "sort_4x50257": ((4, 50257), lambda x: torch.sort(x, dim=-1, descending=True, stable=True)),
    "topk_k1000_4x50257": ((4, 50257), lambda x: torch.topk(x, 1000, dim=-1)),
    "median_dim_8x2048": ((8, 2048), lambda x: torch.median(x, dim=-1)),
}


def probe(name: str, shape: tuple[int, ...], fn) -> dict[str, object]:
    torch.manual_seed(0)
    x = torch.randn(*shape, device="cuda")
    x[0, 7] = float("nan")
    x[1, :64] = 0.5  # ties
    result: dict[str, object] = {"case": name}
    try:
        with inductor_config.patch({"triton.decompose_sort_ops": True}):
            torch._dynamo.reset()
            compiled = torch.compile(fn, fullgraph=True)
            got, codes = run_and_get_code(compiled, x)
        source = "\n".join(codes)
        result["aten_fallback_in_code"] = any(
            f"aten.{op}" in source for op in ("sort", "topk", "median")
        )
        want = fn(x)
        result["values_equal"] = torch.equal(got[0].nan_to_num(9.0), want[0].nan_to_num(9.0))
        result["indices_equal"] = torch.equal(got[1], want[1])
        result["compiled_us"] = round(per_call_us(compiled, x), 1)
        result["eager_us"] = round(per_call_us(fn, x), 1)
    except Exception as exc:  # one case failing must not hide the others
        result["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    return result


def main() -> None:
    report: dict[str, object] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "has_option": hasattr(inductor_config.triton, "decompose_sort_ops"),
    }
    if report["has_option"]:
        report["cases"] = [probe(name, shape, fn) for name, (shape, fn) in CASES.items()]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
