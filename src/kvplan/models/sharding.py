"""Weight bytes one rank holds: each checkpoint tensor gets a placement, the per-rank bytes follow.

A placement says which axis of the tensor an engine splits and over how many ranks (ColumnParallelLinear splits
the output rows, RowParallelLinear the input columns, VocabParallelEmbedding the padded vocabulary rows), what
fraction of a group of experts one rank holds (expert parallelism), and which pipeline stage holds it. Engines
assert divisibility for linears (``divide``); a split here rounds up, so a non-divisible case is not
under-counted. The engine rules live in ``engines/<engine>/weights.py``; this module only sums.

    per-rank bytes = Σ_tensors on the rank's stage  bytes(shard of the tensor) × tensors of the group on the rank
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kvplan.models.tensors import DTYPE_BITS, TensorGroup

# Leaves whose layout is [in, out] (AWQ / GPTQ packing): a column split cuts axis 1, a row split axis 0.
IN_OUT_LEAVES = ("qweight", "qzeros", "scales")
SCALAR_LEAVES = ("weight_shape", "weight_global_scale", "input_global_scale", "input_scale", "weight_scale_2",
                 "k_scale", "v_scale")


@dataclass(frozen=True)
class WeightsEstimate:
    """Weights one rank holds after loading (what "Load weight end ... mem usage" / "Model loading took" count)."""

    bytes_per_rank: int
    parts: dict[str, int]  # per-rank bytes by module group (embedding, attention, experts, rope_cache, ...)
    source: str
    exact: bool  # True when the tensors come from the checkpoint's safetensors headers
    assumptions: tuple[str, ...]
    load_peak_bytes: int = 0  # transient peak while loading (e.g. online quantization keeps bf16 first); 0 = final


@dataclass(frozen=True)
class Placement:
    part: str
    axis: int | None = None  # split axis (None: whole tensor)
    ways: int = 1
    pad_to: int = 1  # the split axis is first padded to a multiple of this (vocab padding)
    per_rank_count: int | None = None  # tensors of the group on this rank (expert parallelism); None = all
    fraction: tuple[int, int] | None = None  # explicit share (num, den) when no axis split applies (fused QKV)
    stage: str = "all"  # "all", "first", "last", or "layer" (the group's layer decides)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def shard_bytes(g: TensorGroup, p: Placement) -> int:
    """Bytes of the group's tensors on one rank."""
    shape = g.shape
    bits = DTYPE_BITS[g.dtype]
    count = g.count if p.per_rank_count is None else p.per_rank_count
    if p.axis is not None and p.axis < len(shape) and (shape[p.axis] > 1 or p.pad_to > 1) and p.ways > 1:
        rows = shape[p.axis]
        padded = cdiv(rows, p.pad_to) * p.pad_to
        per = cdiv(padded, p.ways)
        numel = 1
        for i, d in enumerate(shape):
            numel *= per if i == p.axis else d
        return cdiv(numel * bits, 8) * count
    if p.axis is not None and p.pad_to > 1 and p.axis < len(shape):  # padded but whole (TP 1)
        numel = 1
        for i, d in enumerate(shape):
            numel *= cdiv(d, p.pad_to) * p.pad_to if i == p.axis else d
        return cdiv(numel * bits, 8) * count
    one = g.one.nbytes
    if p.fraction is not None:
        num, den = p.fraction
        return cdiv(one * num, den) * count
    return one * count


def split_axis(leaf: str, shape: tuple[int, ...], parallel: str) -> int | None:
    """Axis a column ('col') or row ('row') split cuts for a tensor whose last name part is ``leaf``."""
    if leaf in SCALAR_LEAVES or len(shape) == 0:
        return None
    if leaf in IN_OUT_LEAVES:
        return 1 if parallel == "col" else 0
    if leaf == "g_idx":
        return 0 if parallel == "row" else None
    if leaf == "bias" or len(shape) == 1:
        return 0 if parallel == "col" else None
    return 0 if parallel == "col" else 1


def pp_stage_of_layer(layer: int, ranges: list[range]) -> int | None:
    for s, r in enumerate(ranges):
        if layer in r:
            return s
    return None


@dataclass
class StageSums:
    """Per-stage, per-part byte sums."""

    stages: list[dict[str, int]] = field(default_factory=list)

    def add(self, stage: int | None, part: str, n: int) -> None:
        targets = range(len(self.stages)) if stage is None else (stage,)
        for s in targets:
            self.stages[s][part] = self.stages[s].get(part, 0) + n

    def heaviest(self) -> tuple[int, dict[str, int]]:
        best = max(range(len(self.stages)), key=lambda s: sum(self.stages[s].values()))
        return best, self.stages[best]


def per_rank_sum(groups: Sequence[TensorGroup], place: Callable[[TensorGroup], Placement | None],
                 layer_ranges: list[range]) -> StageSums:
    """Sum the placed groups per pipeline stage (layers outside every stage, e.g. MTP layers, are skipped
    unless the placement keeps them on "all" stages).

    Groups identical but for their layer are placed once (``tensors.fold_rows``): a row's bytes count once per
    layer of the stage, ``shard_bytes × |row layers ∩ stage layers|``. This needs a placement that depends on the
    layer only through whether it is below the layout's ``n_layers`` (``models.placement.place``: layers from
    n_layers on are not built), and stages below n_layers (``pp_ranges`` of the model's layers). Each stage's parts
    keep the order in which a walk of the groups first adds them."""
    from kvplan.models.tensors import fold_rows

    sums: list[dict[str, int]] = [{} for _ in layer_ranges]
    first: list[dict[str, int]] = [{} for _ in layer_ranges]  # part -> position of its first group in the stage
    last = len(layer_ranges) - 1

    def add(stage: int | None, part: str, n: int, pos: int) -> None:
        for s in (range(len(sums)) if stage is None else (stage,)):
            sums[s][part] = sums[s].get(part, 0) + n
            if pos < first[s].get(part, pos + 1):
                first[s][part] = pos

    def add_one(g: TensorGroup, p: Placement, pos: int) -> None:  # one group, as placed
        n = shard_bytes(g, p)
        if p.stage == "first":
            add(0, p.part, n, pos)
        elif p.stage == "last":
            add(last, p.part, n, pos)
        elif p.stage == "layer" and g.layer is not None:
            s = pp_stage_of_layer(g.layer, layer_ranges)
            if s is not None:
                add(s, p.part, n, pos)
        else:
            add(None, p.part, n, pos)

    for row in fold_rows(groups):
        g = row.group
        p = place(g)
        if p is None:
            continue
        if g.layer is None:
            add_one(g, p, row.positions[0])
        elif p.stage != "layer" or any(r.step != 1 for r in layer_ranges):  # not a placement by layer: each group
            for layer, pos in zip(row.layers, row.positions, strict=True):
                member = replace(g, layer=layer)
                pm = place(member)
                if pm is not None:
                    add_one(member, pm, pos)
        else:
            n = shard_bytes(g, p)
            for s, r in enumerate(layer_ranges):
                lo, hi = bisect_left(row.layers, r.start), bisect_left(row.layers, r.stop)
                if hi > lo:
                    add(s, p.part, n * (hi - lo), min(row.positions[lo:hi]))
    return StageSums([{k: d[k] for k in sorted(d, key=f.__getitem__)} for d, f in zip(sums, first, strict=True)])


def gib_str(n: int) -> str:
    return f"{n / 2**30:.2f}"


def describe_parts(parts: dict[str, int], limit: int = 8) -> str:
    """'experts 66.43, attention 2.94, ...' (GiB, largest first)."""
    items = sorted(((k, v) for k, v in parts.items() if v), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {gib_str(v)}" for k, v in items[:limit])
