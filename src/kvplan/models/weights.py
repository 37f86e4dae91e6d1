"""The tensors a weights estimate starts from: the checkpoint's safetensors headers when a checkpoint directory
is at hand (exact), else the tensors config.json implies (``models.synth``, estimated).

Engines place these tensors on ranks (``engines/<engine>/weights.py``, ``models.sharding``). The whole-checkpoint
size (``estimate_weight_bytes``) is the same sum without sharding.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.paths import stat_mode
from kvplan.models.spec import ModelSpec
from kvplan.models.tensors import TensorGroup


@dataclass(frozen=True)
class Tensors:
    groups: tuple[TensorGroup, ...]
    exact: bool
    source: str
    notes: tuple[str, ...] = ()


def estimate_weight_bytes(spec: ModelSpec, quant: dict[str, Any] | None) -> int:
    """Whole-checkpoint bytes (all ranks together) from config.json's architecture and quantization_config (once per
    model: ``models.facts.checkpoint_bytes``)."""
    from kvplan.models.facts import checkpoint_bytes

    return checkpoint_bytes(spec, quant)


def override_bytes(override_gib: float) -> int:
    from kvplan.units import GiB

    if override_gib < 0:
        raise KvplanError(f"--weights-gib must be >= 0, got {override_gib}")
    return int(override_gib * GiB)


def checkpoint_dir_of(model: ModelSpec, explicit: str | None = None) -> str | None:
    """A local checkpoint directory with safetensors files: ``explicit`` (a path in the command or
    --model-config DIR), else the directory of the config.json the spec was read from (local path or HF cache
    snapshot). None when there is none (catalog entries)."""
    for cand in (explicit, model.source):
        if not cand or "://" in str(cand):
            continue
        p = os.path.expanduser(str(cand))  # strings: a catalog model stops at one stat of a name that is not there
        try:
            d = p if stat.S_ISDIR(stat_mode(p)) else os.path.dirname(p) or "."
            if stat.S_ISDIR(stat_mode(d)) and any(Path(d).glob("*.safetensors")):
                return str(Path(d))
        except OSError:
            continue
    return None


_HEADER_CACHE: dict[tuple[str, tuple[tuple[str, int, int], ...]], tuple[TensorGroup, ...]] = {}


def checkpoint_key(checkpoint_dir: str | None) -> tuple[str, tuple[tuple[str, int, int], ...]] | None:
    """What a checkpoint directory's tensors depend on: its real path and each safetensors file's name, size and
    mtime (None without a directory)."""
    from kvplan.models.tensors import safetensors_files

    if not checkpoint_dir:
        return None
    files = safetensors_files(checkpoint_dir)
    return (os.path.realpath(checkpoint_dir),
            tuple((f.name, int(f.stat().st_size), int(f.stat().st_mtime_ns)) for f in files))


def _header_groups(checkpoint_dir: str) -> tuple[TensorGroup, ...]:
    from kvplan.models.tensors import group_tensors, read_safetensors_headers

    key = checkpoint_key(checkpoint_dir)
    assert key is not None
    if key not in _HEADER_CACHE:
        if len(_HEADER_CACHE) >= 4:
            _HEADER_CACHE.pop(next(iter(_HEADER_CACHE)))
        _HEADER_CACHE[key] = tuple(group_tensors(read_safetensors_headers(checkpoint_dir)))
    return _HEADER_CACHE[key]


def load_tensors(model: ModelSpec, checkpoint_dir: str | None) -> Tensors:
    """The checkpoint's tensor groups: headers if ``checkpoint_dir`` has safetensors files, else synthesized."""
    from kvplan.models.facts import synthesized

    if checkpoint_dir:
        from kvplan.models.tensors import safetensors_files

        files = safetensors_files(checkpoint_dir)
        if files:
            groups = _header_groups(checkpoint_dir)
            return Tensors(groups, True, f"safetensors headers of {len(files)} file(s) in {checkpoint_dir}")
    if model.config is None:
        raise KvplanError(f"{model.name}: no config.json to derive the weights from",
                          "pass --model-config PATH or --weights-gib (per rank)")
    groups, notes = synthesized(model)
    return Tensors(groups, False, "synthesized from config.json (no safetensors at hand)", notes)


def hold_in_dtype(groups: tuple[TensorGroup, ...], dtype: str) -> tuple[TensorGroup, ...]:
    """Unquantized float tensors as the engine holds them: in the runtime dtype (both engines create parameters
    under ``set_default_torch_dtype(model dtype)`` and copy the checkpoint into them). Quantization scales and
    fp32-by-construction tensors (``e_score_correction_bias``) keep their dtype; per-channel scales
    [out, 1] are float32 parameters whatever the checkpoint stored (``ChannelQuantScaleParameter(...,
    dtype=torch.float32)`` in both engines' compressed_tensors_w8a8_{int8,fp8}.py::create_weights). Once per
    group tuple and dtype."""
    hit = _HELD.get((id(groups), dtype))
    if hit is None or hit[0] is not groups:
        if len(_HELD) >= 32:
            _HELD.clear()
        hit = _HELD[(id(groups), dtype)] = (groups, _hold(groups, dtype))
    return hit[1]


_HELD: dict[tuple[int, str], tuple[tuple[TensorGroup, ...], tuple[TensorGroup, ...]]] = {}


def _hold(groups: tuple[TensorGroup, ...], dtype: str) -> tuple[TensorGroup, ...]:
    out = []
    for g in groups:
        leaf = g.template.rsplit(".", 1)[-1]
        if leaf == "weight_scale" and len(g.shape) == 2 and g.shape[1] == 1 and g.dtype in ("F16", "BF16"):
            out.append(TensorGroup(g.template, g.shape, "F32", g.layer, g.count))
            continue
        if g.dtype in ("F32", "F16", "BF16") and g.dtype != dtype and "scale" not in leaf \
                and leaf != "e_score_correction_bias":
            g = TensorGroup(g.template, g.shape, dtype, g.layer, g.count)
        out.append(g)
    return tuple(out)
