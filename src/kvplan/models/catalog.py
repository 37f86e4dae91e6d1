"""Where a ModelSpec comes from: --model-config, a local checkpoint, the local HF cache, or the catalog.

The embedded catalog (``catalog.json``) keeps verbatim subsets of real config.json files with their
source URL and the checkpoint's safetensors ``total_size``, so that planning works offline on a fresh
machine. Nothing is ever fetched from a hub.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.config import checkpoint_weight_bytes, read_config_file, spec_from_config
from kvplan.models.paths import stat_mode
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


def _hf_cache_dirs() -> tuple[Path, ...]:
    """The HF hub cache directories (HF_HUB_CACHE, then HF_HOME/hub), per the environment variables that name them."""
    env = os.environ
    key = (env.get("HF_HUB_CACHE"), env.get("HF_HOME"), env.get("HOME"))
    found = _HF_DIRS.get(key)
    if found is None:
        dirs = []
        if os.environ.get("HF_HUB_CACHE"):
            dirs.append(Path(os.environ["HF_HUB_CACHE"]))
        home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
        dirs.append(home / "hub")
        if len(_HF_DIRS) >= 16:
            _HF_DIRS.clear()
        found = _HF_DIRS[key] = tuple(dirs)
    return found


_HF_DIRS: dict[tuple[str | None, ...], tuple[Path, ...]] = {}


def find_in_hf_cache(repo_id: str) -> Path | None:
    """config.json of ``org/name`` in the local HF cache (newest snapshot), offline."""
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/")):
        return None
    folder = "models--" + repo_id.replace("/", "--")  # one path component
    for root in _hf_cache_dirs():
        try:
            snaps = os.path.join(root, folder, "snapshots")  # a string first: most plans stop at this one stat
            if not stat.S_ISDIR(stat_mode(snaps)):
                continue
            found = sorted(Path(snaps).glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:  # a name too long for a cache folder, an unreadable cache: not in the cache
            continue
        if found:
            return found[0]
    return None


def spec_from_catalog(entry: dict[str, Any]) -> ModelSpec:
    """The spec of a catalog entry, built once per entry (the catalog is data the package ships: it does not change
    while the process runs), so every plan of the model shares one spec and its memoized facts."""
    hit = _CATALOG_SPECS.get(id(entry))
    if hit is None or hit[0] is not entry:
        if len(_CATALOG_SPECS) >= 256:
            _CATALOG_SPECS.clear()
        hit = _CATALOG_SPECS[id(entry)] = (entry, _spec_from_entry(entry))
    return hit[1]


_CATALOG_SPECS: dict[int, tuple[dict[str, Any], ModelSpec]] = {}  # id(entry) -> (entry, spec); entries stay alive


def _spec_from_entry(entry: dict[str, Any]) -> ModelSpec:
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
    p = os.path.expanduser(model)
    try:
        mode = stat_mode(p)
    except OSError as e:
        raise KvplanError(f"model {model!r}: cannot read it ({e.strerror})") from None
    if stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and Path(p).suffix == ".json"):
        return _spec_from_file(Path(p), name=model)
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
        return _catalog_spec(model, entry)
    raise KvplanError(f"unknown model {model!r}: not a local checkpoint, not in the HF cache, not in the catalog",
                      "pass --model-config PATH/TO/config.json (kvplan never downloads)")


def _catalog_spec(name: str, entry: dict[str, Any]) -> ModelSpec:
    """The catalog entry's spec as asked for by ``name`` (an alias or another organisation's name adds a note), one
    instance per name and entry."""
    key = (name, id(entry))
    hit = _NAMED_SPECS.get(key)
    if hit is None or hit[0] is not entry:
        spec = spec_from_catalog(entry)
        note = resolution_note(name, entry)
        hit = (entry, replace(spec, notes=(note, *spec.notes)) if note else spec)
        if len(_NAMED_SPECS) >= 256:
            _NAMED_SPECS.clear()
        _NAMED_SPECS[key] = hit
    return hit[1]


_NAMED_SPECS: dict[tuple[str, int], tuple[dict[str, Any], ModelSpec]] = {}
