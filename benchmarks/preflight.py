"""Preflight fidelity: every case with a launch command (or its args), a GPU and a KV figure, planned by
``kvplan check`` from the command alone — no figure of the log is fed in — and compared with the KV capacity
the engine then logged.

    python benchmarks/preflight.py [--corpus DIR ...] [--json]

``--corpus`` may be given more than once; the default is ../shared/logcorpus (the development corpus).
``--corpus tests/data/preflight`` is the held-out corpus of public launches nobody tuned kvplan for (its README);
its cases may carry ``model_config`` (a vendored config.json, relative to the corpus), passed to ``check``.

Compared figure: SGLang ``#tokens`` / ``max_total_num_tokens`` (per rank); vLLM ``GPU KV cache size`` tokens
(V1) or ``# GPU blocks`` (V0). Ends with the line
``preflight: N cases, X % within 1 %, Y % within 2 %, band coverage Z %, median band width W %``
where the band is the plan's ``per_rank.kv_tokens_range`` and its width is (hi - lo) / predicted.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from corpus import DEFAULT_CORPUS, engine_version, gpu_option, load_cases, model_config, model_id  # noqa: E402
from corpus import command as case_command  # noqa: E402

TOKEN_KEYS = ("kv_tokens", "max_total_num_tokens", "gpu_kv_cache_tokens", "gpu_kv_tokens")


def observed(case: dict) -> tuple[str, int] | None:
    """(figure, value) the log printed: tokens where printed, else vLLM V0's GPU blocks."""
    obs = case.get("observed") or {}
    for k in TOKEN_KEYS:
        v = obs.get(k)
        if isinstance(v, int) and v > 0:
            return "tokens", v
    v = obs.get("gpu_blocks")
    if isinstance(v, int) and v > 0:
        return "blocks", v
    return None


def predicted(plan: dict, figure: str) -> tuple[int | None, list[float] | None]:
    """The plan's figure and its band, in the unit the log printed."""
    rank, replica = plan["per_rank"], plan["per_replica"]
    band = rank.get("kv_tokens_range")
    if figure == "blocks":
        blocks = rank.get("kv_blocks")
        if blocks is None or not rank.get("kv_tokens"):
            return None, None
        scale = blocks / rank["kv_tokens"]
        return blocks, [b * scale for b in band] if band else None
    if plan["engine"] == "vllm":  # "GPU KV cache size" is per replica (summed over KV groups' view)
        tokens = replica["kv_tokens"]
        scale = tokens / rank["kv_tokens"] if rank.get("kv_tokens") else 1.0
        return tokens, [b * scale for b in band] if band else None
    return rank["kv_tokens"], band


def run_case(case: dict, corpus: Path = DEFAULT_CORPUS) -> dict | None:
    from kvplan import check
    from kvplan.errors import KvplanError

    fig = observed(case)
    opts = gpu_option(case, default=None)
    cmd = case_command(case)
    row = {"id": case["id"], "engine": case["engine"], "model": model_id(case), "figure": None, "observed": None,
           "predicted": None, "error_pct": None, "band": None, "reason": None,
           "gpu": opts.get("gpu") or (f"{opts['gpu_mem_mib']} MiB" if opts and "gpu_mem_mib" in opts else None),
           "gpu_inferred": bool(case.get("gpu_inferred"))}
    if fig is None or cmd is None or not (opts or case.get("gpu")):
        return None  # not a preflight case: no KV figure, no command/model, or no GPU named or implied
    row["figure"], row["observed"] = fig
    if not opts:  # a GPU is named, but kvplan's catalog lacks it and the log printed no total: report, don't hide
        row["gpu"], row["version"] = case["gpu"], engine_version(case) or "?"
        row["reason"] = (f"GPU {case['gpu']!r} is not in kvplan's GPU catalog and the log printed no total memory "
                         "(kvplan gpus lists the catalog)")
        return row
    if engine_version(case):
        opts["engine_version"] = engine_version(case)
    if model_config(case, corpus):
        opts["model_config"] = model_config(case, corpus)
    row["version"] = opts.get("engine_version", "?")
    try:
        plan = check(cmd, host_mem_gib=4096.0, **opts).to_dict()
    except KvplanError as e:
        row["reason"] = str(e)
        return row
    except Exception as e:  # noqa: BLE001 - a crash is a bug: show it, keep going
        row["reason"] = f"CRASH {type(e).__name__}: {e}"
        return row
    pred, band = predicted(plan, fig[0])
    row["predicted"], row["band"] = pred, band
    if pred is not None:
        row["error_pct"] = round((pred - fig[1]) / fig[1] * 100, 2)
    return row


def summary(rows: list[dict]) -> str:
    done = [r for r in rows if r["error_pct"] is not None]
    n = len(done)
    if not n:
        return f"preflight: {len(rows)} cases, none planned"
    w1 = sum(abs(r["error_pct"]) <= 1 for r in done)
    w2 = sum(abs(r["error_pct"]) <= 2 for r in done)
    banded = [r for r in done if r["band"]]
    cover = sum(r["band"][0] <= r["observed"] <= r["band"][1] for r in banded)
    width = statistics.median((r["band"][1] - r["band"][0]) / r["predicted"] * 100 for r in banded) if banded else None
    cov = f"{100 * cover / len(banded):.0f} %" if banded else "n/a (no band)"
    wid = f"{width:.1f} %" if width is not None else "n/a"
    return (f"preflight: {n} cases, {100 * w1 / n:.0f} % within 1 %, {100 * w2 / n:.0f} % within 2 %, "
            f"band coverage {cov}, median band width {wid} ({len(rows) - n} refused)")


def table(rows: list[dict]) -> list[str]:
    """One row per case, grouped by engine and GPU (``*`` marks a GPU inferred from printed figures)."""
    out = [f"{'case':<58} {'version':<11} {'fig':<6} {'logged':>9} {'predicted':>9} {'err %':>7}  band / reason"]
    for key in sorted({(r["engine"], str(r["gpu"])) for r in rows}):
        out.append(f"-- {key[0]} on {key[1]}")
        for r in (r for r in rows if (r["engine"], str(r["gpu"])) == key):
            err = "" if r["error_pct"] is None else f"{r['error_pct']:+.2f}"
            band = f"[{r['band'][0]:,.0f}, {r['band'][1]:,.0f}]" if r["band"] else ""
            name = r["id"][:57] + ("*" if r.get("gpu_inferred") else "")
            out.append(f"{name:<58} {str(r.get('version'))[:11]:<11} {r['figure']:<6} {r['observed']:>9} "
                       f"{str(r['predicted'] or ''):>9} {err:>7}  {band or r['reason'] or ''}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", action="append", help="corpus directory (repeatable); default ../shared/logcorpus")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    corpora = [Path(c) for c in (a.corpus or [str(DEFAULT_CORPUS)])]
    results = []
    for corpus in corpora:
        rows = [r for r in (run_case(c, corpus) for c in load_cases(corpus)) if r is not None]
        results.append((corpus, rows))
    if a.json:
        print(json.dumps({str(c): rows for c, rows in results}, indent=1))
        return
    for corpus, rows in results:
        print(f"== {corpus}")
        print("\n".join(table(rows)))
    for corpus, rows in results:
        print(summary(rows) + (f"  [{corpus.name}]" if len(results) > 1 else ""))


if __name__ == "__main__":
    main()
