"""Template contexts, one function per command, each from the command's stable JSON dict only.

``check`` and ``plan`` share one view; ``simulate`` adds its own function here and a template, nothing else.
"""

from __future__ import annotations

from typing import Any

from kvplan.report.html import fmt
from kvplan.report.html.stacked import StackedChart, layout


def _chart(c: StackedChart) -> dict[str, Any]:
    return {"model": c, "svg": layout(c)}


def figures(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, value, scope) rows of the key figures, every value with its unit."""
    r, n, rep = d["per_rank"], d["per_node"], d["per_replica"]
    rows = [("KV tokens", f"{r['kv_tokens']:,}", "per rank"),
            ("KV pool", fmt.gib(r["kv_pool_bytes"]), "per rank"),
            ("weights", fmt.gib(r["weights_bytes"]), "per rank"),
            ("KV bytes per token", f"{r['kv_bytes_per_token']:,} B", "per rank"),
            ("max running requests", f"{r['max_running_requests']:,}", "per rank (per DP worker)"),
            ("distinct KV tokens", f"{rep['kv_tokens']:,}", "per replica"),
            (f"requests of {rep['avg_tokens']:,} tokens that fit at once", f"{rep['requests_fit']:,}", "per replica")]
    if r.get("host_kv_bytes"):
        rows.append(("host KV pool", fmt.host(r["host_kv_bytes"]), "per rank"))
    rows += [("host KV requested", fmt.host(n["host_kv_bytes"]), "per node"),
             ("host memory available", "not given" if n["host_available_bytes"] is None else
              fmt.gib(n["host_available_bytes"]), f"per node ({n['host_available_source']})")]
    return rows


def check_body(d: dict[str, Any]) -> dict[str, Any]:
    """The charts, figures, findings and suggested command of one check JSON (also the serve page's fragment)."""
    from kvplan.report.html.gpu import gpu_chart
    from kvplan.report.html.host import host_chart
    from kvplan.report.html.ledger import ledger_chart

    sug = d.get("suggested") or {}
    after = None
    if d.get("suggested_command") and sug:
        after = (f"{sug['per_rank']['kv_tokens']:,} KV tokens per rank; host KV "
                 f"{fmt.host(sug['per_node']['host_kv_bytes'])} per node")
    led = ledger_chart(d)
    return {"d": d, "gpu": _chart(gpu_chart(d)), "host": _chart(host_chart(d)), "figures": figures(d),
            "ledger": _chart(led) if led is not None else None,
            "findings": d.get("findings") or [], "suggested_command": d.get("suggested_command"),
            "suggested_after": after, "assumptions": d.get("assumptions") or []}


def _header(d: dict[str, Any], kind: str) -> dict[str, Any]:
    m, c = d.get("model") or {}, d.get("cluster") or {}
    host = f" · host {c['host_mem_gib']:,g} GiB" if c.get("host_mem_gib") else ""
    return {"kind": kind, "engine": f"{d.get('engine')} {d.get('engine_version')}", "command": d.get("command"),
            "model": f"{m.get('name')} ({m.get('architecture')}, {m.get('attention')})" if m else "",
            "hardware": (f"{c.get('gpu')} · {c.get('gpu_mem_mib', 0):,} MiB per GPU · {c.get('gpus_per_node')} GPUs "
                         f"per node × {c.get('nodes')} node(s){host}") if c else "",
            "verdict": d.get("verdict")}


def check_view(d: dict[str, Any], kind: str = "check") -> dict[str, Any]:
    return {"header": _header(d, kind), **check_body(d)}


def explain_view(d: dict[str, Any]) -> dict[str, Any]:
    from kvplan.report.html.bars import comparison_chart

    plan = d.get("plan")
    ctx: dict[str, Any] = {"header": {**_header(plan or d, "explain"), "verdict": (plan or {}).get("verdict")},
                           "comparisons": d.get("comparisons") or [], "cmp_svg": comparison_chart(
                               d.get("comparisons") or []), "missing": d.get("missing") or [],
                           "unsupported": d.get("unsupported"), "findings": d.get("findings") or [],
                           "lines": (d.get("lines_read"), d.get("lines_matched"))}
    if plan:
        body = check_body(plan)
        ctx.update(gpu=body["gpu"], host=body["host"], ledger=body["ledger"], figures=body["figures"],
                   assumptions=body["assumptions"],
                   suggested_command=body["suggested_command"], suggested_after=body["suggested_after"])
    return ctx


SERIES = (("running", "running requests (all sources)", "requests"), ("queued", "queued requests", "requests"),
          ("kv_usage", "KV pool usage", "%"), ("gen_tps", "generation throughput", "tokens/s"))


def diagnose_view(d: dict[str, Any]) -> dict[str, Any]:
    from kvplan.report.html.bars import lever_charts
    from kvplan.report.html.lines import Series, line_chart

    pts = d.get("series") or []
    sources = sorted({p.get("source") or "" for p in pts})
    timed = all(p.get("t_s") is not None for p in pts)
    charts = []
    for key, title, unit in SERIES:
        series = []
        for src in sources:
            xy = tuple((p["t_s"] if timed else p["i"], p[key] * (100 if key == "kv_usage" else 1)) for p in pts
                       if (p.get("source") or "") == src and p.get(key) is not None)
            if xy:
                series.append(Series(src, xy))
        charts.append(line_chart(f"series-{key.replace('_', '-')}", title, series, unit, "s" if timed else "sample"))
    levers = d.get("levers") or []
    best = _best_lever(levers)
    return {"header": {"kind": "diagnose", "engine": f"{d.get('engine')} {d.get('engine_version')}",
                       "command": d.get("command"), "model": "", "hardware": "", "verdict": None},
            "d": d, "series_svgs": charts, "sources": sources, "lever_svgs": lever_charts(levers), "levers": levers,
            "best": best}


def _best_lever(levers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The lever with the largest expected throughput (else KV tokens) whose plan has no error finding."""
    ok = [lv for lv in levers if lv["name"] != "current" and lv.get("command")
          and not any("(error)" in f for f in lv.get("findings") or [])]
    if not ok:
        return None
    return max(ok, key=lambda lv: (lv.get("expected_gen_tps") or 0, lv.get("kv_tokens") or 0))


FLEET_BARS = (("kv_usage", "KV pool usage", "%"), ("queued", "queued requests (mean)", ""),
              ("gen_tps", "generation throughput", " tok/s"))


def fleet_view(d: dict[str, Any]) -> dict[str, Any]:
    """``diagnose --prometheus``: a bar per replica for KV usage, queue and throughput, the fleet summary, and
    each replica's evidence and levers (the same table as one server's report)."""
    from kvplan.report.html.bars import Bar, bar_chart

    colors = {"kv-capacity": "#c44e52", "host-tier": "#c44e52", "client-bound": "#55a868", "unknown": "#4c72b0"}
    charts = []
    for key, title, unit in FLEET_BARS:
        bars = []
        for r in d["replicas"]:
            v = (r.get("observed") or {}).get(key)
            v = None if v is None else v * 100 if key == "kv_usage" else v
            bars.append(Bar(r["instance"], r["instance"], v, "–" if v is None else f"{v:,.1f}{unit}",
                            colors.get(r["bottleneck"], "#dd8452")))
        charts.append(bar_chart(f"fleet-{key.replace('_', '-')}", f"{title}, per replica", bars))
    f = d["fleet"]
    return {"header": {"kind": "diagnose", "engine": f"fleet · Prometheus {d['prometheus']}", "command": None,
                       "model": f"{f['replicas']} replica(s) · last {d['window_s']:g} s, step {d['step_s']:g} s"
                       + (f" · {{{d['match']}}}" if d["match"] else ""), "hardware": "", "verdict": None},
            "d": d, "fleet": f, "charts": charts}


def view(kind: str, d: dict[str, Any]) -> dict[str, Any]:
    if kind in ("check", "plan"):
        return check_view(d, kind)
    if kind == "explain":
        return explain_view(d)
    if kind == "diagnose":
        return diagnose_view(d)
    if kind == "fleet":
        return fleet_view(d)
    raise ValueError(f"no HTML view for {kind!r}")
