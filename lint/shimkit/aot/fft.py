"""FFTs and the complex values they make, in real arithmetic, for the slim runtimes.

`torch.fft.*` and `torch.stft` export as `aten._fft_r2c`, `_fft_c2c` and `_fft_c2r`, whose
results are complex tensors; so are what a model then does with them (`abs`, `angle`, a
permute, a product). Inductor generates no kernel for a complex op: each stays a fallback
(`aoti_torch_cpu__fft_r2c`, `aoti_torch_cpu_abs` on complex64, ...), and the slim shims have
no complex dtypes, so compile refused such models (an STFT log-mel front end, for one).

For the slim targets compile rewrites every such op before Inductor sees the program:
- a discrete Fourier transform along a dim of n points is a product with the n x m matrices
  cos(2 pi j k / n) and sin(2 pi j k / n), with torch's normalisation (none, 1/sqrt(n) or
  1/n), m the output's points (n // 2 + 1 for the one-sided transforms of real input); a
  real transform of n = n1 n2 points (n1 >= MIN_FACTOR) runs in two steps, as Cooley and
  Tukey split it (two products and the twiddle factors);
- every complex value is carried as a pair of real tensors of its shape (real and
  imaginary parts) through the ops `_complex_ops` knows. Complex values also come from
  `view_as_complex` of real pairs and from complex weights and buffers (rotary embeddings
  as LLaMA's reference code writes them: the query's pairs as complex numbers times a
  complex `freqs_cis` buffer); such state is stored as its real pairs (`view_as_real`) and
  joined where the program reads it, so the same rewrite carries it.
The matrices depend on sizes alone: compile evaluates them once (`fold_size_only_values`).
The products cost O(n (n1 + n2)) per real transform (O(n^2) for the others) where an FFT is
O(n log n): faster than torch's runner for audio frames of a few hundred points, slower for
long signals (docs/benchmarks.md).

A program is rewritten only if, afterwards, no complex value is left in it: one that returns
a complex tensor, transforms along a dynamic size, or hands a complex value to an op
`_complex_ops` does not know, is left as it was, and compile's check names its fallbacks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from shimkit.aot.constants import fold_size_only_values

# aten ops (by name, any overload) whose call makes complex values: the transforms (those
# whose names do not start with "_" decompose into the three that do) and the
# constructors.
FFT_OPS = (
    "_fft_r2c", "_fft_c2c", "_fft_c2r", "stft", "istft", "polar", "complex", "view_as_complex"
)  # fmt: skip
FFT_PREFIX = "fft_"
# Those that may take real arguments only, rewritten whatever their arguments (a
# conversion to a complex dtype among them).
REAL_IN_COMPLEX_OUT = ("_fft_r2c", "polar", "complex", "_to_copy")

# fft_norm_mode (ATen's SpectralOpsUtils.h): how a transform of n points is scaled.
NORM_NONE, NORM_BY_ROOT_N, NORM_BY_N = 0, 1, 2

Pair = tuple[Any, Any]  # (real part, imaginary part), real tensors of one shape

# A real transform of n = n1 n2 points runs in two steps (n1 <= n2) from this n1 on.
MIN_FACTOR = 8


def _scale(norm: int, points: int) -> float:
    if norm == NORM_BY_ROOT_N:
        return 1.0 / math.sqrt(points)
    return 1.0 / points if norm == NORM_BY_N else 1.0


def _scaled(pair: Pair, scale: float) -> Pair:
    return pair if scale == 1.0 else (pair[0] * scale, pair[1] * scale)


def _dft_matrices(torch: ModuleType, n: int, m: int, like: Any) -> Pair:
    """cos and sin of 2 pi j k / n for j < n (rows) and k < m (columns), in `like`'s dtype on
    its device (compile evaluates them once: `fold_size_only_values`). j k is reduced mod n
    in integers first, so large products lose no bits."""
    j = torch.arange(n, dtype=torch.int64, device=like.device).unsqueeze(1)
    k = torch.arange(m, dtype=torch.int64, device=like.device).unsqueeze(0)
    angle = torch.remainder(j * k, n).to(torch.float64) * (2.0 * math.pi / n)
    return torch.cos(angle).to(like.dtype), torch.sin(angle).to(like.dtype)


def _product(torch: ModuleType, parts: Sequence[Any], dim: int, blocks: Any) -> Pair:
    """One matrix product along `dim`: the parts side by side there, times `blocks`
    ([len(parts) * n, 2 * m]); its two halves are the result's real and imaginary parts."""
    x = torch.cat([p.movedim(dim, -1) for p in parts], -1) @ blocks
    m = blocks.shape[1] // 2
    return x[..., :m].movedim(-1, dim), x[..., m:].movedim(-1, dim)


def _split(n: int) -> tuple[int, int] | None:
    """n = n1 n2 with n1 the largest factor up to sqrt(n), when that is at least
    MIN_FACTOR (the two-step transform then does fewer operations than one product)."""
    n1 = next(f for f in range(math.isqrt(n), 0, -1) if n % f == 0)
    return (n1, n // n1) if n1 >= MIN_FACTOR else None


def _r2c_in_two_steps(torch: ModuleType, x: Any, dim: int, n1: int, n2: int, m: int) -> Pair:
    """The first m points of the forward transform of real x along `dim`, n = n1 n2 points,
    as Cooley and Tukey split it: with j = j1 + n1 j2 and k = k2 + n2 k1, a transform of n2
    points along j2 (one real product), the twiddle factors e^(-2 pi i j1 k2 / n), and a
    transform of n1 points along j1 (one product): n (2 n2 + 4 n1) multiply-adds per signal
    instead of 2 n m."""
    n = n1 * n2
    lead = x.movedim(dim, -1).shape[:-1]
    frames = x.movedim(dim, -1).reshape(*lead, n2, n1)  # [..., j2, j1]
    cos2, sin2 = _dft_matrices(torch, n2, n2, x)
    y = torch.cat([cos2, -sin2], 0) @ frames  # [..., (re, im) x k2, j1]
    y_re, y_im = y[..., :n2, :], y[..., n2:, :]
    k2 = torch.arange(n2, dtype=torch.int64, device=x.device).unsqueeze(1)
    j1 = torch.arange(n1, dtype=torch.int64, device=x.device).unsqueeze(0)
    angle = torch.remainder(k2 * j1, n).to(torch.float64) * (2.0 * math.pi / n)
    t_cos, t_sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    twiddled = torch.cat([y_re * t_cos + y_im * t_sin, y_im * t_cos - y_re * t_sin], -1)
    cos1, sin1 = _dft_matrices(torch, n1, n1, x)
    blocks = torch.cat([torch.cat([cos1, -sin1], 1), torch.cat([sin1, cos1], 1)], 0)
    z = twiddled @ blocks  # [..., k2, (re, im) x k1]
    re = z[..., :n1].transpose(-1, -2).reshape(*lead, n)[..., :m]  # k = k2 + n2 k1
    im = z[..., n1:].transpose(-1, -2).reshape(*lead, n)[..., :m]
    return re.movedim(-1, dim), im.movedim(-1, dim)


def _r2c(torch: ModuleType, x: Any, dim: int, onesided: bool) -> Pair:
    """The unnormalised forward transform of real x along `dim`: re = x C, im = -x S, in two
    steps where n splits into two factors large enough (`_split`)."""
    n = x.shape[dim]
    m = n // 2 + 1 if onesided else n
    split = _split(n)
    if split is not None:
        return _r2c_in_two_steps(torch, x, dim, *split, m)
    cos, sin = _dft_matrices(torch, n, m, x)
    return _product(torch, [x], dim, torch.cat([cos, -sin], 1))


def _c2c(torch: ModuleType, z: Pair, dim: int, forward: bool) -> Pair:
    """The unnormalised transform of z along `dim`, e^(-2 pi i j k / n) forward (+ inverse):
    [re, im] [[C, -sS], [sS, C]] with s = 1 forward, -1 inverse."""
    n = z[0].shape[dim]
    cos, sin = _dft_matrices(torch, n, n, z[0])
    sin = sin if forward else -sin
    blocks = torch.cat([torch.cat([cos, -sin], 1), torch.cat([sin, cos], 1)], 0)
    return _product(torch, list(z), dim, blocks)


def _c2r(torch: ModuleType, z: Pair, dim: int, n: int) -> Any:
    """The unnormalised inverse of a one-sided spectrum along `dim`, n real points out: the
    bins above n // 2 are the conjugates of those below, so each bin 0 < k < n / 2 counts
    twice (bins past n // 2 not at all); the imaginary parts of bins 0 and n / 2 drop out
    (sin 0 = sin pi j = 0). out = [re, im] [[W C^T], [-W S^T]]."""
    re, im = z
    bins = re.shape[dim]
    k = torch.arange(bins, dtype=torch.int64, device=re.device)
    twice = ((k > 0) & (2 * k < n)).to(re.dtype)
    weight = torch.where(k <= n // 2, twice + 1, torch.zeros_like(twice)).unsqueeze(1)
    cos, sin = _dft_matrices(torch, n, bins, re)
    blocks = torch.cat([weight * cos.t(), -weight * sin.t()], 0)  # [2 bins, n]
    return (torch.cat([re.movedim(dim, -1), im.movedim(dim, -1)], -1) @ blocks).movedim(-1, dim)


def _dims(dims: Sequence[int], rank: int) -> list[int]:
    return [d % rank for d in dims]


def _points(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def _static(shape: Sequence[Any], dims: Sequence[int]) -> bool:
    return all(type(shape[d]) is int for d in dims)


class _Complex:
    """Complex values as (real, imaginary) pairs: to and from the tensors the traced
    program passes between ops (complex by dtype, made by `view_as_complex` of the
    pair stacked last, read back with `view_as_real`; the rewrite's last step removes
    each such round trip, so no complex tensor is left)."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch

    def split(self, z: Any) -> Pair:
        pair = self.torch.view_as_real(z)
        return pair[..., 0], pair[..., 1]

    def join(self, re: Any, im: Any) -> Any:
        return self.torch.view_as_complex(self.torch.stack([re, im], -1))

    def parts(self, v: Any) -> Pair:
        """A complex tensor's parts; a real tensor or a number as (v, 0)."""
        torch = self.torch
        if isinstance(v, torch.Tensor) and v.is_complex():
            return self.split(v)
        if isinstance(v, complex):
            return v.real, v.imag
        return v, 0.0


def _is_complex(torch: ModuleType, v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_is_complex(torch, x) for x in v)
    return isinstance(v, complex) or (isinstance(v, torch.Tensor) and v.is_complex())


def _complex_ops(torch: ModuleType) -> dict[Any, Callable[..., Any]]:
    """aten overload -> its rewrite for complex arguments (real arguments are left alone)."""
    aten = torch.ops.aten
    c = _Complex(torch)

    # Transforms over sizes known at compile time only (the matrices' shapes are those
    # sizes); NotImplemented leaves the call, and so the whole program, as it was.
    def r2c(x: Any, dim: Sequence[int], normalization: int, onesided: bool) -> Any:
        dims = _dims(dim, x.dim())
        if not _static(x.shape, dims):
            return NotImplemented
        pair = _r2c(torch, x, dims[-1], onesided)
        for d in reversed(dims[:-1]):
            pair = _c2c(torch, pair, d, True)
        return c.join(*_scaled(pair, _scale(normalization, _points(x.shape, dims))))

    def c2c(z: Any, dim: Sequence[int], normalization: int, forward: bool) -> Any:
        dims = _dims(dim, z.dim())
        if not _static(z.shape, dims):
            return NotImplemented
        pair = c.split(z)
        for d in dims:
            pair = _c2c(torch, pair, d, forward)
        return c.join(*_scaled(pair, _scale(normalization, _points(z.shape, dims))))

    def c2r(z: Any, dim: Sequence[int], normalization: int, last_dim_size: int) -> Any:
        dims = _dims(dim, z.dim())
        if not _static(z.shape, dims) or type(last_dim_size) is not int:
            return NotImplemented
        pair = c.split(z)
        for d in dims[:-1]:
            pair = _c2c(torch, pair, d, False)
        out = _c2r(torch, pair, dims[-1], last_dim_size)
        scale = _scale(normalization, _points(z.shape, dims[:-1]) * last_dim_size)
        return out if scale == 1.0 else out * scale

    def elementwise(fn: Callable[[Pair], Pair]) -> Callable[..., Any]:
        def rewrite(z: Any) -> Any:
            return c.join(*fn(c.split(z)))

        return rewrite

    def product(a: Any, b: Any) -> Any:
        (ar, ai), (br, bi) = c.parts(a), c.parts(b)
        return c.join(ar * br - ai * bi, ar * bi + ai * br)

    def quotient(a: Any, b: Any) -> Any:
        (ar, ai), (br, bi) = c.parts(a), c.parts(b)
        den = br * br + bi * bi
        return c.join((ar * br + ai * bi) / den, (ai * br - ar * bi) / den)

    def linear(sign: float) -> Callable[..., Any]:
        def rewrite(a: Any, b: Any, alpha: Any = 1) -> Any:
            (ar, ai), (br, bi) = c.parts(a), c.parts(b)
            return c.join(ar + sign * alpha * br, ai + sign * alpha * bi)

        return rewrite

    def each_part(op: Any) -> Callable[..., Any]:
        """An op that moves, selects or sums elements: the same op on each part (the parts
        have the complex tensor's shape, so its dims and sizes apply as they are)."""

        def rewrite(z: Any, *args: Any, **kwargs: Any) -> Any:
            re, im = c.split(z)
            return c.join(op(re, *args, **kwargs), op(im, *args, **kwargs))

        return rewrite

    def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
        parts = [c.parts(t) for t in tensors]
        return c.join(torch.cat([p[0] for p in parts], dim), torch.cat([p[1] for p in parts], dim))

    def to_copy(x: Any, dtype: Any = None, **kwargs: Any) -> Any:
        """A dtype conversion to, from or between complex dtypes (x stays on its device)."""
        to_complex = dtype is not None and dtype.is_complex
        if not x.is_complex() and not to_complex:
            return NotImplemented
        convert = torch.ops.aten._to_copy.default  # on real parts: not rewritten again
        if not to_complex and dtype is not None:  # complex -> real keeps the real part
            return convert(c.split(x)[0], dtype=dtype, **kwargs)
        re, im = c.split(x) if x.is_complex() else (x, torch.zeros_like(x))
        part = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype)
        return c.join(convert(re, dtype=part, **kwargs), convert(im, dtype=part, **kwargs))

    def pow_scalar(z: Any, exponent: Any) -> Any:
        if exponent != 2:
            return NotImplemented
        return product(z, z)

    return {
        # Complex results from real arguments.
        aten._fft_r2c.default: r2c,
        aten.complex.default: lambda re, im: c.join(*torch.broadcast_tensors(re, im)),
        aten.polar.default: lambda r, theta: c.join(r * torch.cos(theta), r * torch.sin(theta)),
        # Complex arguments.
        aten._fft_c2c.default: c2c,
        aten._fft_c2r.default: c2r,
        aten.abs.default: lambda z: torch.hypot(*c.split(z)),
        aten.angle.default: lambda z: torch.atan2(c.split(z)[1], c.split(z)[0]),
        aten.real.default: lambda z: c.split(z)[0],
        aten.imag.default: lambda z: c.split(z)[1],
        aten.neg.default: elementwise(lambda p: (-p[0], -p[1])),
        aten._conj.default: elementwise(lambda p: (p[0], -p[1])),
        aten.conj_physical.default: elementwise(lambda p: (p[0], -p[1])),
        aten.resolve_conj.default: lambda z: z,
        aten.resolve_neg.default: lambda z: z,
        aten.mul.Tensor: product,
        aten.mul.Scalar: product,
        aten.div.Tensor: quotient,
        aten.div.Scalar: quotient,
        aten.add.Tensor: linear(1.0),
        aten.sub.Tensor: linear(-1.0),
        aten.pow.Tensor_Scalar: pow_scalar,
        aten.cat.default: cat,
        aten._to_copy.default: to_copy,
        # The parts are strided views of the pair: reshaped, not viewed.
        aten.view.default: each_part(torch.reshape),
        aten._unsafe_view.default: each_part(torch.reshape),
        **{_overload(aten, name): each_part(_overload(aten, name)) for name in EACH_PART_OPS},
    }


# Ops that move, select or sum elements, applied to each part alike.
EACH_PART_OPS = (
    "sum.dim_IntList",
    "mean.dim",
    "permute.default",
    "reshape.default",
    "expand.default",
    "slice.Tensor",
    "select.int",
    "unsqueeze.default",
    "squeeze.dim",
    "squeeze.dims",
    "transpose.int",
    "clone.default",
    "alias.default",
    "unfold.default",
    "flip.default",
    "roll.default",
    "constant_pad_nd.default",
    "index_select.default",
)


def _overload(aten: Any, name: str) -> Any:
    packet, overload = name.split(".")
    return getattr(getattr(aten, packet), overload)


def _name(op: Any) -> str:
    """An aten overload's op name without namespace or overload ("stft")."""
    schema = getattr(op, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else ""


def _makes_complex(op: Any) -> bool:
    name = _name(op)
    return name in FFT_OPS or name.startswith(FFT_PREFIX)


def _when_complex(torch: ModuleType, rewrite: Callable[..., Any], always: bool) -> Any:
    """The decomposition for one op: `rewrite` where an argument is complex (or `always`),
    else none (NotImplemented: the op stays as it is)."""

    def decomposition(*args: Any, **kwargs: Any) -> Any:
        if always or _is_complex(torch, args) or _is_complex(torch, list(kwargs.values())):
            return rewrite(*args, **kwargs)
        return NotImplemented

    return decomposition


def _drop_round_trips(torch: ModuleType, exported: Any) -> None:
    """Replaces each view_as_real(view_as_complex(p)) with p, then drops the dead nodes."""
    aten = torch.ops.aten
    graph = exported.graph_module.graph
    for node in list(graph.nodes):
        source = node.args[0] if node.target == aten.view_as_real.default else None
        if getattr(source, "target", None) == aten.view_as_complex.default:
            node.replace_all_uses_with(source.args[0])
    graph.eliminate_dead_code()
    exported.graph_module.recompile()


def _complex_state(exported: Any) -> dict[Any, str]:
    """The placeholders of `exported`'s complex weights, buffers and constants, with the
    names of their tensors."""
    signature = exported.graph_signature
    state = {
        **signature.inputs_to_parameters,
        **signature.inputs_to_buffers,
        **signature.inputs_to_lifted_tensor_constants,
    }
    return {
        node: state[node.name]
        for node in exported.graph.nodes
        if node.op == "placeholder"
        and node.name in state
        and getattr(node.meta.get("val"), "is_complex", lambda: False)()
    }


def _complex_state_as_pairs(torch: ModuleType, exported: Any, state: dict[Any, str]) -> None:
    """Stores each complex tensor of `state` as its real pairs (view_as_real, [..., 2]) and
    has the program join them (view_as_complex) where it read the complex tensor: the same
    values, in the form the rewrite carries."""
    graph = exported.graph_module.graph
    for node, name in state.items():
        table = exported.constants if name in exported.constants else exported.state_dict
        original = table[name]
        pair = torch.view_as_real(original.detach()).clone()
        if isinstance(original, torch.nn.Parameter):  # the program's verifier wants one
            pair = torch.nn.Parameter(pair, requires_grad=original.requires_grad)
        table[name] = pair
        complex_value = node.meta["val"]
        node.meta["val"] = complex_value.fake_mode.from_tensor(pair, static_shapes=True)
        with graph.inserting_after(node):
            joined = graph.call_function(torch.ops.aten.view_as_complex.default, (node,))
        joined.meta["val"] = complex_value
        node.replace_all_uses_with(joined, delete_user_cb=lambda user, new=joined: user is not new)
    exported.graph_module.recompile()


def complex_values_left(exported: Any) -> list[str]:
    """The ops of the nodes that still make a complex tensor (none: the rewrite held)."""
    left = []
    for node in exported.graph.nodes:
        values = node.meta.get("val")
        values = values if isinstance(values, (list, tuple)) else [values]
        if any(getattr(v, "is_complex", lambda: False)() for v in values):
            left.append(str(node.target))
    return left


def fft_in_math_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with its Fourier transforms as matrix products and its complex values as
    pairs of real tensors, how many calls (and complex weights or buffers) made complex
    values), or (`exported`, 0) when it makes none, or a complex value would be left (an
    output, or an op this module does not rewrite: compile's check then names the
    fallbacks). Complex state is stored as real pairs in `exported` itself, joined where
    read (the same results, also when the rest is left as it was)."""
    state = _complex_state(exported)
    calls = [
        node
        for node in exported.graph.nodes
        if node.op == "call_function" and _makes_complex(node.target)
    ]
    if not calls and not state:
        return exported, 0
    _complex_state_as_pairs(torch, exported, state)
    defaults = torch.export.default_decompositions()
    # The composite transforms (torch.fft.*, stft, istft) as ATen defines them, down to
    # _fft_r2c / _fft_c2c / _fft_c2r; nothing else in the program is decomposed.
    table: dict[Any, Any] = {op: defaults[op] for op in defaults if _makes_complex(op)}
    for op, rewrite in _complex_ops(torch).items():
        table[op] = _when_complex(torch, rewrite, _name(op) in REAL_IN_COMPLEX_OUT)
    rewritten = exported.run_decompositions(table)
    _drop_round_trips(torch, rewritten)
    if complex_values_left(rewritten):
        return exported, 0
    fold_size_only_values(torch, rewritten, "shimkit_dft")
    return rewritten, len(calls) + len(state)
