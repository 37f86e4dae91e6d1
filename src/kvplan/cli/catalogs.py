"""``kvplan models`` and ``kvplan gpus``: the embedded catalogs as Rich tables or JSON (``--json``)."""

from __future__ import annotations

import json
import sys
from typing import Any

BF16 = 2  # bytes per KV element at bf16


def _console() -> Any:
    """A terminal gets its own width (long values wrap); a pipe gets a wide table so grep finds whole names."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=220)


def kv_bytes_per_token_bf16(spec: Any) -> int:
    """K+V bytes one token costs in the whole model at bf16 on one GPU (TP1), summed over attention layers.

    MHA/GQA/MQA: kv_heads × (head_dim + v_head_dim) × attention layers × 2 B (sliding-window layers counted at
    full size, as SGLang stores them for non-hybrid-SWA models); MLA: (kv_lora_rank + qk_rope_head_dim) ×
    layers × 2 B (SGLang ``MLATokenToKVPool``); linear-attention / Mamba layers hold a per-request state instead
    and are not counted."""
    layers = spec.n_full_layers + spec.n_swa_layers
    if spec.is_mla:
        return spec.mla_kv_dim * layers * BF16
    return spec.num_kv_heads * (spec.head_dim + spec.v_head_dim) * layers * BF16


def model_rows() -> list[dict[str, Any]]:
    from kvplan.errors import KvplanError
    from kvplan.models.catalog import _catalog, spec_from_catalog

    rows = []
    for entry in sorted({id(e): e for e in _catalog().values()}.values(), key=lambda e: e["id"].lower()):
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


def run_models(as_json: bool) -> int:
    rows = model_rows()
    if as_json:
        print(json.dumps({"scope": "kv_bytes_per_token_bf16: whole model, TP1, bf16 KV, per token; "
                          "checkpoint_gb: decimal GB, all ranks together", "models": rows}, indent=2))
        return 0
    from rich.table import Table

    t = Table(title="kvplan model catalog (KV per token: whole model, TP1, bf16)")
    for col, just in (("model", "left"), ("architecture", "left"), ("attention", "left"), ("layers", "right"),
                      ("KV B/token", "right"), ("context", "right"), ("checkpoint GB", "right")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        if "error" in r:
            t.add_row(r["id"], "[red]" + r["error"] + "[/]", "", "", "", "", "")
            continue
        ck = "?" if r["checkpoint_gb"] is None else f"{r['checkpoint_gb']:,.1f}" + (" est." if
                                                                                   r["checkpoint_estimated"] else "")
        t.add_row(r["id"], r["architecture"], r["attention"], str(r["layers"]), f"{r['kv_bytes_per_token_bf16']:,}",
                  f"{r['context_len']:,}", ck)
    _console().print(t)
    return 0


def gpu_rows() -> list[dict[str, Any]]:
    from kvplan.hardware.gpus import all_gpus

    return [g.to_dict() for g in all_gpus()]


def run_gpus(as_json: bool) -> int:
    rows = gpu_rows()
    if as_json:
        print(json.dumps({"scope": "total_mib: memory.total as nvidia-smi / amd-smi print it; mem_bw_gbps: decimal "
                          "GB/s; *_dense_tflops: dense, no sparsity", "gpus": rows}, indent=2))
        return 0
    from rich.table import Table

    t = Table(title="kvplan GPU catalog")
    for col, just in (("name (as nvidia-smi / amd-smi print it)", "left"), ("platform", "left"), ("MiB", "right"),
                      ("HBM GB/s", "right"), ("BF16 TFLOPS", "right"), ("FP8 TFLOPS", "right"),
                      ("aliases", "left")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"

    for g in rows:
        t.add_row(g["name"], g["platform"], f"{g['total_mib']:,}" if g["total_mib"] else "?", num(g["mem_bw_gbps"]),
                  num(g["bf16_dense_tflops"]), num(g["fp8_dense_tflops"]), ", ".join(g["aliases"]))
    _console().print(t)
    return 0
