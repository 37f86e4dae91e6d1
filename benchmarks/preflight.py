"""Preflight fidelity: every case with a launch command (or its args), a GPU and a KV figure, planned by
``kvplan check`` from the command alone — no figure of the log is fed in — and compared with the KV capacity
the engine then logged.

    python benchmarks/preflight.py [--corpus DIR ...] [--json] [--write-spreads]

``--corpus`` may be given more than once; the default is ../shared/logcorpus (the development corpus).
``--corpus tests/data/preflight`` is the held-out corpus of public launches nobody tuned kvplan for (its README);
its cases may carry ``model_config`` (a vendored config.json, relative to the corpus), passed to ``check``.

Compared figure: SGLang ``#tokens`` / ``max_total_num_tokens`` (per rank); vLLM ``GPU KV cache size`` tokens
(V1) or ``# GPU blocks`` (V0). Ends with, per corpus, the in-sample line
``preflight: N cases, X % within 1 %, Y % within 2 %, band coverage Z %, median band width W % (half-width H %)``
where the band is the plan's ``per_rank.kv_tokens_range``, its width (hi - lo) / predicted and its half-width
half that; the same figures leave-one-out (``preflight_loo``: each log planned again with every calibration it
feeds refitted without it; logs feeding a fixed, hand-read figure are not scored there); and the per-component
table (``preflight_components``: weights, baseline, activation peak, graphs, non-torch, KV memory, KV tokens per
engine-version range, against every log that prints the component).

``--write-spreads`` rewrites ``src/kvplan/engines/spreads.json`` (the per-component errors the band's spreads are
taken from, ``preflight_spreads``) from the corpora given, then prints the figures with the new table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from corpus import DEFAULT_CORPUS, engine_version, gpu_option, load_cases, model_config, model_id  # noqa: E402
from corpus import command as case_command  # noqa: E402
from preflight_components import component_errors, version_range  # noqa: E402
from preflight_components import table as component_table  # noqa: E402
from preflight_loo import loo_row  # noqa: E402

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
    """The case's row: logged vs planned KV figure and band (None: not a preflight case)."""
    return plan_case(case, corpus)[0]


def plan_case(case: dict, corpus: Path = DEFAULT_CORPUS) -> tuple[dict | None, dict | None]:
    """(row, plan as a dict) of one case; the plan is None where kvplan refused or the case is not planned."""
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
        return None, None  # not a preflight case: no KV figure, no command/model, or no GPU named or implied
    row["figure"], row["observed"] = fig
    if not opts:  # a GPU is named, but kvplan's catalog lacks it and the log printed no total: report, don't hide
        row["gpu"], row["version"] = case["gpu"], engine_version(case) or "?"
        row["reason"] = (f"GPU {case['gpu']!r} is not in kvplan's GPU catalog and the log printed no total memory "
                         "(kvplan gpus lists the catalog)")
        return row, None
    if engine_version(case):
        opts["engine_version"] = engine_version(case)
    if model_config(case, corpus):
        opts["model_config"] = model_config(case, corpus)
    row["version"] = opts.get("engine_version", "?")
    try:
        plan = check(cmd, host_mem_gib=4096.0, **opts).to_dict()
    except KvplanError as e:
        row["reason"] = str(e)
        return row, None
    except Exception as e:  # noqa: BLE001 - a crash is a bug: show it, keep going
        row["reason"] = f"CRASH {type(e).__name__}: {e}"
        return row, None
    pred, band = predicted(plan, fig[0])
    row["predicted"], row["band"] = pred, band
    if pred is not None:
        row["error_pct"] = round((pred - fig[1]) / fig[1] * 100, 2)
    return row, plan


def figures(rows: list[dict]) -> dict | None:
    """Within 1 % / 2 %, band coverage and median band width / half-width (%) of the scored rows."""
    done = [r for r in rows if r["error_pct"] is not None]
    if not done:
        return None
    n = len(done)
    banded = [r for r in done if r["band"]]
    widths = [(r["band"][1] - r["band"][0]) / r["predicted"] * 100 for r in banded]
    return {"n": n, "within_1_pct": 100 * sum(abs(r["error_pct"]) <= 1 for r in done) / n,
            "within_2_pct": 100 * sum(abs(r["error_pct"]) <= 2 for r in done) / n,
            "band_coverage_pct": (100 * sum(r["band"][0] <= r["observed"] <= r["band"][1] for r in banded)
                                  / len(banded)) if banded else None,
            "median_band_width_pct": statistics.median(widths) if widths else None,
            "median_half_width_pct": statistics.median(widths) / 2 if widths else None}


def _figs(f: dict) -> str:
    cov = f"{f['band_coverage_pct']:.0f} %" if f["band_coverage_pct"] is not None else "n/a (no band)"
    wid = (f"{f['median_band_width_pct']:.1f} % (half-width {f['median_half_width_pct']:.1f} %)"
           if f["median_band_width_pct"] is not None else "n/a")
    return (f"{f['within_1_pct']:.0f} % within 1 %, {f['within_2_pct']:.0f} % within 2 %, band coverage {cov}, "
            f"median band width {wid}")


def summary(rows: list[dict]) -> str:
    f = figures(rows)
    if f is None:
        return f"preflight: {len(rows)} cases, none planned"
    return f"preflight: {f['n']} cases, {_figs(f)} ({len(rows) - f['n']} refused)"


def loo_summary(rows: list[dict]) -> str:
    """The leave-one-out line: how many logs were held out anyway, refitted, or not scored (fixed figures)."""
    kinds = [str(r.get("loo") or "") for r in rows if r.get("predicted") is not None]
    held, refit = kinds.count("held-out"), kinds.count("refit")
    fixed = sum(k.startswith("fixed") for k in kinds)
    scored = [r for r in rows if not str(r.get("loo") or "").startswith("fixed")]
    f = figures(scored)
    head = f"leave-one-out: of {len(kinds)} planned, {held} feed no calibration, {refit} planned again with their " \
           f"calibrations refitted without them, {fixed} not scored (feed a fixed figure)"
    return head + (f"; {f['n']} scored: {_figs(f)}" if f else "; none scored")


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


def run_corpus(corpus: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """(in-sample rows, leave-one-out rows, per-component rows) of one corpus."""
    rows, loo, comps = [], [], []
    for c in load_cases(corpus):
        row, plan = plan_case(c, corpus)
        if row is None:
            continue
        rows.append(row)
        lr = loo_row(c, lambda c=c: run_case(c, corpus))
        if lr is not None:
            loo.append(lr)
        if plan is not None:
            rng = version_range(row["engine"], str(row.get("version")))
            comps.extend(dict(x, engine=row["engine"], range=rng, id=row["id"])
                         for x in component_errors(c, plan, row))
    return rows, loo, comps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", action="append", help="corpus directory (repeatable); default ../shared/logcorpus")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-spreads", action="store_true",
                    help="rewrite src/kvplan/engines/spreads.json from these corpora (both, for the shipped table)")
    a = ap.parse_args()
    corpora = [Path(c) for c in (a.corpus or [str(DEFAULT_CORPUS)])]
    if a.write_spreads:
        from preflight_spreads import write

        from kvplan.engines import spreads

        print(write(corpora))
        spreads._table.cache_clear()
        spreads.spread.cache_clear()
    results = [(corpus, *run_corpus(corpus)) for corpus in corpora]
    if a.json:
        print(json.dumps({str(c): {"rows": rows, "in_sample": figures(rows), "leave_one_out_rows": loo,
                                   "leave_one_out": figures([r for r in loo if not str(r.get("loo") or "")
                                                             .startswith("fixed")]),
                                   "components": comps} for c, rows, loo, comps in results}, indent=1))
        return
    for corpus, rows, _, comps in results:
        print(f"== {corpus}")
        print("\n".join(table(rows)))
        print(f"-- per component (per rank; error = predicted - logged) [{corpus.name}]")
        print("\n".join(component_table(comps)))
    for corpus, rows, loo, _ in results:
        tag = f"  [{corpus.name}]" if len(results) > 1 else ""
        print(summary(rows) + tag)
        print(loo_summary(loo) + tag)


if __name__ == "__main__":
    main()
