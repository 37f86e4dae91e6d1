"""``kvplan models [--json]``: the embedded model catalog (ids a launch command may name) with each entry's
architecture, attention, layers, KV bytes per token, context and checkpoint size, as a Rich table or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

BF16 = 2  # bytes per KV element at bf16


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from kvplan.cli.exitcodes import HelpFormatter, exit_codes
    from kvplan.cli.options import json_option

    p = sub.add_parser("models", help="list the embedded model catalog",
                       epilog=exit_codes((0, "the catalog was printed")), formatter_class=HelpFormatter)
    json_option(p, "print the catalog as one JSON object")
    return p


def kv_bytes_per_token_bf16(spec: Any) -> int:
    """K+V bytes one token costs in the whole model at bf16 on one GPU (TP1), summed over attention layers.

    MHA/GQA/MQA: kv_heads × (head_dim + v_head_dim) × attention layers × 2 B (sliding-window layers counted at
    full size, as SGLang stores them for non-hybrid-SWA models); MLA: (kv_lora_rank + qk_rope_head_dim) ×
    layers × 2 B (SGLang ``MLATokenToKVPool``); linear-attention / Mamba layers hold a per-request state instead
    and are not counted."""
    layers = spec.n_full_layers + spec.n_swa_layers
    if spec.is_mla:
        return int(spec.mla_kv_dim * layers * BF16)
    return int(spec.num_kv_heads * (spec.head_dim + spec.v_head_dim) * layers * BF16)


def model_rows() -> list[dict[str, Any]]:
    from kvplan.errors import KvplanError
    from kvplan.models.catalog import catalog_entries, spec_from_catalog

    rows: list[dict[str, Any]] = []
    for entry in catalog_entries():
        try:
            s = spec_from_catalog(entry)
        except KvplanError as e:
            rows.append({"id": entry["id"], "error": str(e)})
            continue
        est = bool(s.weight_bytes_source and s.weight_bytes_source.startswith("estimated"))
        rows.append({
            "id": entry["id"], "aliases": list(entry.get("aliases", [])), "architecture": s.architecture,
            "attention": s.attention_kind, "layers": s.num_layers,
            "kv_bytes_per_token_bf16": kv_bytes_per_token_bf16(s), "context_len": s.context_len,
            "checkpoint_gb": round(s.weight_bytes / 1e9, 1) if s.weight_bytes else None,
            "checkpoint_estimated": est if s.weight_bytes else None, "source": entry.get("source"),
        })
    return rows


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser) -> int:
    from kvplan.cli.tables import NARROW, add_columns, console, table

    rows = model_rows()
    if a.json:
        print(json.dumps({"scope": "kv_bytes_per_token_bf16: whole model, TP1, bf16 KV, per token; "
                          "checkpoint_gb: decimal GB, all ranks together", "models": rows}, indent=2))
        return 0
    con = console()
    wide = con.width >= NARROW  # narrower: the attention kind under the model id, no architecture (all in --json)
    t = table("kvplan model catalog (KV per token: whole model, TP1, bf16)", con)
    add_columns(t, (("model" if wide else "model / attention", "left"), *((("architecture", "left"),
                                                                            ("attention", "left")) if wide else ()),
                    ("layers", "right"), ("KV B/tok", "right"), ("context", "right"), ("ckpt GB", "right")))
    for r in rows:
        if "error" in r:
            t.add_row(r["id"] + "\n[red]" + r["error"] + "[/]", *[""] * (6 if wide else 4))
            continue
        ck = "?" if r["checkpoint_gb"] is None else f"{r['checkpoint_gb']:,.1f}" + ("~" if
                                                                                   r["checkpoint_estimated"] else "")
        nums = (str(r["layers"]), f"{r['kv_bytes_per_token_bf16']:,}", f"{r['context_len']:,}", ck)
        if wide:
            t.add_row(r["id"], r["architecture"], r["attention"], *nums)
        else:
            t.add_row(f"{r['id']}\n[dim]{r['attention']}[/]", *nums)
    con.print(t)
    con.print("KV B/tok: KV bytes per token, whole model; ckpt GB: checkpoint, decimal GB (~ estimated from "
              "config.json)")
    return 0
