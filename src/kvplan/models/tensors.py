"""A checkpoint's tensors as (name, shape, dtype), from its safetensors headers or synthesized from config.json.

safetensors layout (https://github.com/huggingface/safetensors, "Format"): 8 bytes little-endian u64 N, then N
bytes of UTF-8 JSON ``{name: {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, "__metadata__": {..}}``,
then the raw data. Only the length and the JSON are read here; tensor data never is.

Checkpoints hold up to ~10^5 tensors (one per expert and projection), so the planner works on ``TensorGroup``s:
one template name (layer and expert numbers replaced by ``#``), shape and dtype, with how many tensors share it
in each layer. ``models.synth.synthesize_tensors`` expands the groups into the full HF-named list.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError

# safetensors dtype strings -> bits per element (safetensors/src/tensor.rs::Dtype)
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "C64": 64,
}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors itself refuses headers over 100 MB (MAX_HEADER_SIZE)
MAX_FILES = 4096


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor of a checkpoint, whole (before any sharding)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # safetensors dtype string

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return -(-self.numel * DTYPE_BITS[self.dtype] // 8)


@dataclass(frozen=True, slots=True)
class TensorGroup:
    """``count`` tensors of one shape and dtype whose names differ only in their numbers, within one layer.

    ``template`` has ``#`` where the name has a number other than the layer's (expert ids); ``layer`` is the
    decoder layer index (None for tensors outside the decoder stack: embeddings, final norm, vision tower)."""

    template: str
    shape: tuple[int, ...]
    dtype: str
    layer: int | None = None
    count: int = 1

    @property
    def one(self) -> TensorInfo:
        return TensorInfo(self.template, self.shape, self.dtype)

    @property
    def nbytes(self) -> int:
        return self.one.nbytes * self.count

    def expand(self) -> list[TensorInfo]:
        name = self.template if self.layer is None else self.template.replace("{L}", str(self.layer), 1)
        if "#" not in name:
            return [TensorInfo(name, self.shape, self.dtype)] * self.count
        return [TensorInfo(name.replace("#", str(i), 1), self.shape, self.dtype) for i in range(self.count)]


@dataclass(frozen=True, slots=True)
class TensorRow:
    """Tensor groups identical but for their decoder layer (one template, shape, dtype and count), as one row: the
    ~1,700 per-layer groups of a trillion-parameter MoE (384 experts × 61 layers) are a few dozen rows.

    ``group`` is the row's first group (lowest layer); ``layers`` the layers that hold it, ascending (empty for a
    group outside the decoder stack, which is a row of its own); ``positions`` each layer's group's index in the
    list the row was folded from (what keeps sums in the order a walk of the groups would add them)."""

    group: TensorGroup
    layers: tuple[int, ...] = ()
    positions: tuple[int, ...] = ()


def fold_rows(groups: Sequence[TensorGroup]) -> tuple[TensorRow, ...]:
    """The groups folded into rows (``TensorRow``), in the order each row's first group comes; once per group
    tuple (a model's tensors are one memoized tuple per model and dtype)."""
    if not isinstance(groups, tuple):
        return _fold(groups)
    hit = _FOLDED.get(id(groups))
    if hit is None or hit[0] is not groups:
        if len(_FOLDED) >= 32:
            _FOLDED.clear()
        hit = _FOLDED[id(groups)] = (groups, _fold(groups))
    return hit[1]


_FOLDED: dict[int, tuple[tuple[TensorGroup, ...], tuple[TensorRow, ...]]] = {}


def _fold(groups: Sequence[TensorGroup]) -> tuple[TensorRow, ...]:
    rows: dict[object, list[tuple[int | None, int, TensorGroup]]] = {}
    for i, g in enumerate(groups):
        key: object = (g.template, g.shape, g.dtype, g.count) if g.layer is not None else i
        members = rows.get(key)
        if members is None:
            rows[key] = [(g.layer, i, g)]
        else:
            members.append((g.layer, i, g))
    out = []
    for members in rows.values():
        if members[0][0] is None:
            out.append(TensorRow(members[0][2], (), (members[0][1],)))
            continue
        members.sort(key=lambda m: m[0])  # type: ignore[arg-type,return-value]  # layered: ints
        out.append(TensorRow(members[0][2], tuple(m[0] for m in members),  # type: ignore[misc]
                             tuple(m[1] for m in members)))
    out.sort(key=lambda r: min(r.positions))
    return tuple(out)


def _check_entry(name: str, meta: Any, where: str) -> TensorInfo:
    if not isinstance(meta, dict):
        raise KvplanError(f"{where}: header entry {name[:80]!r} is not an object", "not a safetensors file")
    dtype, shape = meta.get("dtype"), meta.get("shape")
    if dtype not in DTYPE_BITS:
        raise KvplanError(f"{where}: tensor {name[:80]!r} has unknown dtype {str(dtype)[:20]!r}",
                          "not a safetensors file, or a newer dtype kvplan does not know")
    if (not isinstance(shape, list) or len(shape) > 8
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 or d > 1 << 48 for d in shape)):
        raise KvplanError(f"{where}: tensor {name[:80]!r} has a malformed shape", "not a safetensors file")
    return TensorInfo(name, tuple(shape), dtype)


def read_header(path: str | Path) -> list[TensorInfo]:
    """Tensors of one ``.safetensors`` file: its 8-byte length and JSON header only."""
    p = Path(path)
    try:
        st = os.stat(p)  # follows symlinks (HF cache snapshots link to blobs)
        if not stat.S_ISREG(st.st_mode):
            raise KvplanError(f"{p}: not a regular file", "pass a checkpoint directory of *.safetensors files")
        with open(p, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise KvplanError(f"{p}: too short for a safetensors file", "the download may be incomplete")
            n = int.from_bytes(head, "little")
            if n < 2 or n > MAX_HEADER_BYTES or n > st.st_size - 8:
                raise KvplanError(f"{p}: safetensors header length {n} is implausible",
                                  "not a safetensors file, or a truncated download")
            raw = f.read(n)
    except OSError as e:
        raise KvplanError(f"{p}: cannot read ({e.strerror})") from None
    from kvplan import validate

    try:
        header = validate.json_value(raw, f"{p}: safetensors header", max_depth=8)
    except validate.BoundExceeded:
        raise
    except KvplanError:
        raise KvplanError(f"{p}: safetensors header is not valid JSON", "not a safetensors file") from None
    if not isinstance(header, dict):
        raise KvplanError(f"{p}: safetensors header is not a JSON object", "not a safetensors file")
    return [_check_entry(k, v, str(p)) for k, v in header.items() if k != "__metadata__"]


def safetensors_files(checkpoint_dir: str | Path) -> list[Path]:
    """The ``*.safetensors`` files of a checkpoint directory (sorted), or [] when there are none."""
    d = Path(checkpoint_dir)
    if not d.is_dir():
        return []
    files = sorted(d.glob("*.safetensors"))
    if len(files) > MAX_FILES:
        raise KvplanError(f"{d}: {len(files)} safetensors files; more than kvplan reads ({MAX_FILES})")
    return files


def read_safetensors_headers(path: str | Path) -> list[TensorInfo]:
    """Every tensor of a checkpoint (a directory of ``*.safetensors`` files, or one file), headers only."""
    p = Path(os.path.expanduser(str(path)))
    files = [p] if p.is_file() or (p.exists() and not p.is_dir()) else safetensors_files(p)
    if not files:
        raise KvplanError(f"{p}: no *.safetensors files", "pass a checkpoint directory (kvplan reads only headers)")
    out: list[TensorInfo] = []
    for f in files:
        out.extend(read_header(f))
    return out


def _template(name: str) -> tuple[str, int | None]:
    """('model.layers.{L}.mlp.experts.#.w1.weight', 3) for 'model.layers.3.mlp.experts.17.w1.weight'."""
    parts = name.split(".")
    layer = None
    for i, part in enumerate(parts):
        if part.isdigit():
            if layer is None and i > 0 and parts[i - 1] in ("layers", "h", "blocks", "layer") \
                    and "vision" not in name and "visual" not in name:
                layer, parts[i] = int(part), "{L}"
            else:
                parts[i] = "#"
    return ".".join(parts), layer


def group_tensors(tensors: list[TensorInfo]) -> list[TensorGroup]:
    """Fold real tensors into groups (same template, layer, shape, dtype)."""
    counts: dict[tuple[str, int | None, tuple[int, ...], str], int] = {}
    for t in tensors:
        tpl, layer = _template(t.name)
        key = (tpl, layer, t.shape, t.dtype)
        counts[key] = counts.get(key, 0) + 1
    return [TensorGroup(tpl, shape, dtype, layer, n) for (tpl, layer, shape, dtype), n in counts.items()]
