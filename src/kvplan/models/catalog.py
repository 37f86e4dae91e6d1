"""Where a ModelSpec comes from: --model-config, a local checkpoint, the local HF cache, or the catalog.

The embedded catalog (``catalog.json``) keeps verbatim subsets of real config.json files with their
source URL and the checkpoint's safetensors ``total_size``, so that planning works offline on a fresh
machine. Nothing is ever fetched from a hub.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.config import checkpoint_weight_bytes, read_config_file, spec_from_config
from kvplan.models.spec import ModelSpec

CATALOG_FILE = Path(__file__).with_name("catalog.json")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, dict[str, Any]]:
    data = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    index: dict[str, dict[str, Any]] = {}
    for entry in data["models"]:
        for key in [entry["id"], *entry.get("aliases", [])]:
            index.setdefault(key.lower(), entry)
    return index


def catalog_ids() -> list[str]:
    return sorted({e["id"] for e in _catalog().values()})


def catalog_entries() -> list[dict[str, Any]]:
    """Every catalog entry once, by id (case ignored): ``kvplan models``."""
    return sorted({id(e): e for e in _catalog().values()}.values(), key=lambda e: str(e["id"]).lower())


def catalog_entry(name: str) -> dict[str, Any] | None:
    """Look a model up by HF id or alias (case-insensitive); a path's last part also matches."""
    idx = _catalog()
    key = name.strip().rstrip("/").lower()
    if key in idx:
        return idx[key]
    base = key.rsplit("/", 1)[-1]
    for cand_id, entry in idx.items():
        if cand_id.rsplit("/", 1)[-1] == base:
            return entry
    return None


def resolution_note(name: str, entry: dict[str, Any]) -> str | None:
    """'resolved X to catalog entry Y' when the name asked for is not the entry's own id (an alias, or the same
    name under another organisation); None when it is."""
    if name.strip().rstrip("/").lower() == entry["id"].lower():
        return None
    how = "an alias of" if name.strip().rstrip("/").lower() in {a.lower() for a in entry.get("aliases", [])} \
        else "the same name as"
    return (f"resolved {name} to catalog entry {entry['id']} ({how} it: same architecture fields; config.json "
            f"from {entry.get('source')}; pass --model-config for the checkpoint's own)")


def _hf_cache_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    dirs.append(home / "hub")
    return dirs


def find_in_hf_cache(repo_id: str) -> Path | None:
    """config.json of ``org/name`` in the local HF cache (newest snapshot), offline."""
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/")):
        return None
    folder = "models--" + repo_id.replace("/", "--")
    for root in _hf_cache_dirs():
        snaps = root / folder / "snapshots"
        try:
            if snaps.is_dir():
                found = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
                if found:
                    return found[0]
        except OSError:  # a name too long for a cache folder, an unreadable cache: not in the cache
            continue
    return None


def spec_from_catalog(entry: dict[str, Any]) -> ModelSpec:
    spec = spec_from_config(entry["config"], name=entry["id"], weight_bytes=entry.get("weight_bytes"),
                            weight_bytes_source=entry.get("weight_bytes_source"), source=entry.get("source"))
    if entry.get("weights_unknown") and entry.get("weight_bytes") is None:
        # the config copy lacks the checkpoint's quantization_config: an estimate would be a wrong number
        from dataclasses import replace

        spec = replace(spec, weight_bytes=None, weight_bytes_source=None)
    return spec


def _tokenizer_max_len(cfg_path: Path) -> int | None:
    from kvplan import validate

    tok = cfg_path.parent / "tokenizer_config.json"
    try:
        if tok.stat().st_size > 64 * 2**20:
            return None
        d = validate.json_value(tok.read_bytes(), str(tok))
        val = d.get("model_max_length") if isinstance(d, dict) else None
    except (OSError, KvplanError):
        return None
    return int(val) if isinstance(val, (int, float)) and not isinstance(val, bool) and 0 < val < 1e12 else None


def _spec_from_file(path: Path | str, name: str) -> ModelSpec:
    cfg, cfg_path = read_config_file(path)
    wb, wsrc = checkpoint_weight_bytes(cfg_path)
    return spec_from_config(cfg, name=name, weight_bytes=wb, weight_bytes_source=wsrc, source=str(cfg_path),
                            tokenizer_max_len=_tokenizer_max_len(cfg_path))


def resolve_model(model: str | None, model_config: str | None = None) -> ModelSpec:
    """Find the architecture for ``model`` (as written in the launch command).

    Order: explicit ``--model-config``; a local directory or file; the local HF cache; the catalog.
    """
    from kvplan import validate

    if model is not None:
        model = validate.path("the model", model, hint="a model is an HF id (org/name) or a checkpoint path")
    if model_config:
        model_config = validate.path("--model-config", model_config, hint="pass config.json or a checkpoint folder")
        spec = _spec_from_file(model_config, name=model or str(model_config))
        if spec.weight_bytes is None and model:
            entry = catalog_entry(model)
            if entry and entry.get("weight_bytes"):
                spec = spec_from_config(read_config_file(model_config)[0], name=model,
                                        weight_bytes=entry["weight_bytes"],
                                        weight_bytes_source=entry.get("weight_bytes_source"),
                                        source=str(model_config))
        return spec
    if not model:
        raise KvplanError("no model given", "the launch command needs --model-path/--model, or pass --model-config")
    p = Path(os.path.expanduser(model))
    try:
        local = p.is_dir() or (p.is_file() and p.suffix == ".json")
    except OSError as e:
        raise KvplanError(f"model {model!r}: cannot read it ({e.strerror})") from None
    if local:
        return _spec_from_file(p, name=model)
    cached = find_in_hf_cache(model)
    if cached is not None:
        spec = _spec_from_file(cached, name=model)
        entry = catalog_entry(model)
        if spec.weight_bytes is None and entry and entry.get("weight_bytes"):
            return spec_from_config(read_config_file(cached)[0], name=model, weight_bytes=entry["weight_bytes"],
                                    weight_bytes_source=entry.get("weight_bytes_source"), source=str(cached))
        return spec
    entry = catalog_entry(model)
    if entry is not None:
        spec = spec_from_catalog(entry)
        note = resolution_note(model, entry)
        return replace(spec, notes=(note, *spec.notes)) if note else spec
    raise KvplanError(f"unknown model {model!r}: not a local checkpoint, not in the HF cache, not in the catalog",
                      "pass --model-config PATH/TO/config.json (kvplan never downloads)")
