"""Stable sorts along a dim longer than Inductor's own sort, as chunk sorts and merges.

Inductor generates a sort kernel on CUDA for a static dim of at most `INDUCTOR_SORT_LIMIT`
elements; a longer sort (all the logits of a vocabulary, for top-p sampling) is the
`sort` fallback, which the slim CUDA shims run on the host (a round trip per call, and a
run that cannot be captured whole in a CUDA graph). For the slim CUDA target compile
rewrites such sorts into ops Inductor generates:

1. Each value becomes an integer key in the sort's order: a float's bits as a signed
   integer of its width with the negative ones' magnitude bits flipped (float16 and
   bfloat16 widened to float32 first, exactly), -0.0 taken as 0.0 and every NaN as one key
   above +inf, as torch orders them; integers are their own keys. A descending sort flips
   every key's bits.
2. The keys, padded to a power-of-two count of chunks with the key type's largest value
   (after every real key; stable ties put the padding last), are sorted in chunks of
   INDUCTOR_SORT_LIMIT, stably, by Inductor's sort.
3. Neighbouring sorted runs are merged pairwise until one is left: an element's place in
   the merged run is its place in its own run plus how many elements of the other run go
   before it (`searchsorted`: strictly smaller keys of the right-hand run, smaller or equal
   keys of the left-hand run, which keeps the sort stable); the merged order is the inverse
   of those places, an int32 scatter (Inductor generates it; an int64 one would be a
   fallback on CUDA), and the keys and original positions are gathered through it.

The values are then gathered from the input at the sorted positions: the values and
indices of torch's stable sort (for sort without `stable=True` torch leaves the order of
equal values unspecified; this gives the stable one). Only static dims are rewritten.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from shimkit.aot.decompose import argument, input_shape, rewrite_calls

# The largest sort dim Inductor lowers to its own kernel (ir.Sort.create's persistent
# limit, max_rblock, in torch 2.11 and 2.13); beyond it, aten.sort is a fallback.
INDUCTOR_SORT_LIMIT = 512


def _order_keys(torch: ModuleType, x: Any, descending: bool) -> Any:
    """Integer keys whose ascending order is the stable sort's order of `x` (see step 1)."""
    if x.dtype == torch.bool:
        keys = x.to(torch.int32)
    elif x.dtype.is_floating_point:
        wide = x.to(torch.float64) if x.dtype == torch.float64 else x.to(torch.float32)
        ints = torch.int64 if wide.dtype == torch.float64 else torch.int32
        info = torch.iinfo(ints)
        wide = torch.where(wide == 0, torch.zeros_like(wide), wide)  # -0.0 sorts as 0.0
        bits = wide.view(ints)
        keys = torch.where(bits < 0, bits ^ info.max, bits)
        # Above every float's key (+inf's included), below the padding's.
        keys = torch.where(torch.isnan(wide), torch.full_like(keys, info.max - 1), keys)
    else:
        keys = x
    return ~keys if descending else keys


def _merge_pairs(torch: ModuleType, keys: Any, positions: Any) -> tuple[Any, Any]:
    """Sorted runs of length L along the last dim merged pairwise into runs of 2L."""
    length = keys.shape[-1] // 2
    pairs = (*keys.shape[:-1], 2, length)
    left, right = keys.reshape(pairs).unbind(-2)
    left, right = left.contiguous(), right.contiguous()
    own = torch.arange(length, device=keys.device)
    # Right-hand elements go after equal left-hand ones: the merge stays stable.
    left_places = own + torch.searchsorted(right, left)
    right_places = own + torch.searchsorted(left, right, right=True)
    places = torch.cat([left_places, right_places], -1)
    slots = torch.arange(2 * length, dtype=torch.int32, device=keys.device).expand(places.shape)
    order = torch.zeros_like(slots).scatter(-1, places, slots).long()
    return keys.gather(-1, order), positions.gather(-1, order)


def stable_sort(torch: ModuleType, x: Any, dim: int, descending: bool) -> tuple[Any, Any]:
    """torch.sort(x, dim, descending, stable=True) for a static dim of any length, as
    chunk sorts of INDUCTOR_SORT_LIMIT and pairwise merges (values, int64 indices)."""
    moved = x.movedim(dim, -1)
    length = moved.shape[-1]
    if length <= INDUCTOR_SORT_LIMIT:
        return torch.sort(x, dim=dim, descending=descending, stable=True)
    keys = _order_keys(torch, moved, descending)
    chunks = 1
    while chunks * INDUCTOR_SORT_LIMIT < length:
        chunks *= 2
    keys = in_chunks(torch, keys, chunks, torch.iinfo(keys.dtype).max)
    keys, positions = torch.sort(keys, dim=-1, stable=True)
    starts = torch.arange(chunks, device=x.device).unsqueeze(-1) * INDUCTOR_SORT_LIMIT
    keys, positions = keys.flatten(-2), (positions + starts).flatten(-2)
    run = INDUCTOR_SORT_LIMIT
    while run < keys.shape[-1]:
        blocks = (*keys.shape[:-1], keys.shape[-1] // (2 * run), 2 * run)
        merged_keys, merged_positions = _merge_pairs(
            torch, keys.reshape(blocks), positions.reshape(blocks)
        )
        keys, positions = merged_keys.flatten(-2), merged_positions.flatten(-2)
        run *= 2
    positions = positions[..., :length]
    return moved.gather(-1, positions).movedim(-1, dim), positions.movedim(-1, dim)


def in_chunks(torch: ModuleType, x: Any, chunks: int, fill: Any) -> Any:
    """`x`'s last dim as `chunks` chunks of INDUCTOR_SORT_LIMIT [..., chunks, limit], the last
    padded with `fill` (a value the sort puts after every real one)."""
    padding = chunks * INDUCTOR_SORT_LIMIT - x.shape[-1]
    if padding:
        tail = torch.full((*x.shape[:-1], padding), fill, dtype=x.dtype, device=x.device)
        x = torch.cat([x, tail], -1)
    return x.reshape(*x.shape[:-1], chunks, INDUCTOR_SORT_LIMIT)


def long_static_dim(shape: tuple[Any, ...] | None, dim: int) -> bool:
    """Whether `dim` of `shape` is static and longer than INDUCTOR_SORT_LIMIT."""
    if not shape:
        return False
    size = shape[dim % len(shape)]
    return type(size) is int and size > INDUCTOR_SORT_LIMIT


def _sorting(torch: ModuleType, indices_only: bool) -> Any:
    """The form of sort (or argsort), for both overloads: `.default` passes dim and
    descending by position, `.stable` by keyword with `stable`."""

    def sort(x: Any, dim: int = -1, descending: bool = False, *, stable: Any = None) -> Any:
        if not long_static_dim(tuple(x.shape), dim):
            return NotImplemented
        values, indices = stable_sort(torch, x, dim, descending)
        return indices if indices_only else (values, indices)

    return sort


def long_sorts_in_merge_form(torch: ModuleType, exported: Any) -> tuple[Any, int]:
    """(`exported` with every sort and argsort along a static dim longer than
    INDUCTOR_SORT_LIMIT as chunk sorts and merges, how many calls were rewritten). For slim
    CUDA blobs only: the slim CPU shims sort natively."""
    aten = torch.ops.aten

    def plain(node: Any) -> bool:
        return long_static_dim(input_shape(node), int(argument(node, 1, "dim", -1)))

    def stable(node: Any) -> bool:
        return long_static_dim(input_shape(node), int(node.kwargs.get("dim", -1)))

    sort, argsort = _sorting(torch, indices_only=False), _sorting(torch, indices_only=True)
    return rewrite_calls(
        exported,
        {
            aten.sort.default: (sort, plain),
            aten.sort.stable: (sort, stable),
            aten.argsort.default: (argsort, plain),
            aten.argsort.stable: (argsort, stable),
        },
    )
