"""Rich rendering of a simulation and of a tune search (the JSON is the same data: result.py, tune.py)."""

from __future__ import annotations

from typing import Any


def _lat(d: dict[str, Any]) -> str:
    def f(v: float | None) -> str:
        if v is None:
            return "-"
        return f"{v * 1000:.0f} ms" if v < 1 else f"{v:,.1f} s"

    return f"p50 {f(d.get('p50'))} · p90 {f(d.get('p90'))} · p99 {f(d.get('p99'))}"


def render_calibration(fit: Any, console: Any) -> None:
    from rich.table import Table

    d = fit.to_dict(max_rows=12)
    console.print(f"[bold]Step time calibrated[/bold] on {d['log']}: {d['observations']} serving lines, "
                  f"MAPE {d['mape_pct']} % (roofline prior alone: {d['prior_mape_pct']} %)")
    loo = d["leave_one_out_median_abs_pct"]
    console.print(f"  median error {d['in_sample_median_abs_pct']} % on the lines fitted, "
                  f"{'-' if loo is None else loo} % leave-one-out (each line predicted by the fit on the others)")
    tm = d["terms"]
    console.print(f"  step = {tm['fixed_step_s'] * 1000:.2f} ms fixed + {tm['per_sequence_s'] * 1000:.3f} ms per "
                  f"decoding sequence + {tm['per_prompt_token_s'] * 1000:.4f} ms per prompt token (+ KV attended)")
    console.print("  " + ", ".join(f"{k} {v:g}" for k, v in d["coefficients"].items()))
    t = Table(title="fit residuals (last lines)", show_lines=False)
    for col in ("running", "weight", "KV tokens", "observed step", "fitted step", "residual", "observed tok/s",
                "fitted tok/s"):
        t.add_column(col, justify="right")
    for r in d["rows"]:
        run = str(r["running"]) if r["mean_batch"] == r["running"] else f"{r['mean_batch']:g} (→{r['running']})"
        t.add_row(run, f"{r['weight']:g}", f"{r['kv_tokens']:,}", f"{r['observed_step_s'] * 1000:.1f} ms",
                  f"{r['fitted_step_s'] * 1000:.1f} ms", f"{r['residual_pct']:+.1f} %",
                  f"{r['observed_gen_tps']:,.0f}", f"{r['fitted_gen_tps']:,.0f}")
    console.print(t)


def render_simulation(res: Any, fit: Any = None, series: bool = False, band: dict | None = None,
                      calibration_launch: dict | None = None) -> None:
    from rich.table import Table

    from kvplan.report.console import console as make_console

    c = make_console()
    d = res.to_dict()
    ln, wl = d["launch"], d["workload"]
    c.print(f"[bold]{ln['engine']} {ln['engine_version']}[/bold] · {ln['kv_tokens_per_instance']:,} KV tokens × "
            f"{ln['dp_groups']} group(s) × {ln['replicas']} replica(s) ({ln['kv_source']})")
    c.print(f"workload: {wl['name']} · clients {wl['concurrency'] or '-'} · rate {wl['rate'] or '-'} req/s")
    if fit is not None:
        render_calibration(fit, c)
        if calibration_launch is not None:
            cl = calibration_launch
            c.print(f"  the log's own launch ({cl['given_by']}): {cl['command'] or 'not known'}; its pool "
                    f"{'anchors' if cl['pool_used_for_simulation'] else 'is not used for'} this launch: {cl['reason']}",
                    soft_wrap=True, highlight=False)
    else:
        c.print(f"step time: {d['step_model']['source']}")
    th, lo, sc = d["throughput"], d["load"], d["scheduler"]
    t = Table(show_header=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    steady = f" (steady state {th['steady_gen_tps']:,.0f})" if th["steady_gen_tps"] is not None else ""
    t.add_row("generation", f"{th['gen_tps']:,.0f} tok/s{steady}")
    if band is not None and band["gen_tps"] is not None:
        lo_b, hi_b = band["steady_gen_tps"] or band["gen_tps"]
        t.add_row("band", f"{lo_b:,.0f}-{hi_b:,.0f} tok/s (the other end of what the calibration log leaves open: "
                  f"{band['other_end']})")
    t.add_row("prompt", f"{th['prompt_tps']:,.0f} tok/s")
    t.add_row("TTFT", _lat(d["latency"]["ttft_s"]))
    t.add_row("TPOT", _lat(d["latency"]["tpot_s"]))
    t.add_row("end to end", _lat(d["latency"]["e2e_s"]))
    t.add_row("running / queued", f"{lo['running_mean']:,.1f} / {lo['queued_mean']:,.1f} (time-weighted means)")
    t.add_row("KV usage", f"{lo['kv_usage_mean']:.0%}")
    t.add_row("preempted / retracted", f"{sc['preempted_requests']:,} requests in {sc['preemption_events']:,} events")
    hit = sc["prefix_hit_rate"]
    t.add_row("prefix-cache hits", "-" if hit is None else f"{hit:.1%} of looked-up tokens")
    h = d["host_tier"]
    if h["enabled"]:
        t.add_row("host tier", f"write-through {h['write_through_bytes_per_rank'] / 1e9:,.1f} GB, load-back "
                  f"{h['load_back_bytes_per_rank'] / 1e9:,.1f} GB per rank ({h['write_gbps_per_rank']} GB/s written)")
    t.add_row("makespan", f"{d['makespan_s']:,.1f} s for {d['completed']:,} requests"
              + (f" ({d['aborted']} aborted)" if d["aborted"] else ""))
    t.add_row("simulated in", f"{d['sim']['wall_s']} s ({d['sim']['events']:,} events, "
              f"{d['sim']['speedup_vs_real_time']:,}× real time)")
    c.print(t)
    m = d.get("measured")
    if m:
        c.print(f"[bold]measured by the benchmark[/bold]: {m.get('output_tps')} tok/s output, "
                f"TTFT {_lat(m['ttft_s'])}, e2e {_lat(m['e2e_s'])}")
    for n in d["notes"]:
        c.print(f"[dim]note: {n}[/dim]")
    if series:
        st = Table(title="over time")
        for col in ("t (s)", "running", "queued", "KV usage", "gen tok/s"):
            st.add_column(col, justify="right")
        pts = d["series"]
        step = max(1, len(pts) // 40)
        for p in pts[::step]:
            st.add_row(f"{p['t']:,.0f}", f"{p['running'] or 0:.1f}", f"{p['queued'] or 0:.1f}",
                       f"{(p['kv_usage'] or 0):.0%}", f"{p['gen_tps']:,.0f}")
        c.print(st)


def render_tune(res: Any, fit: Any, top: int) -> None:
    from rich.table import Table

    from kvplan.report.console import console as make_console

    c = make_console()
    first = res.ranked[0] if res.current.refused and res.ranked and res.ranked[0].name == "repaired" else res.current
    if fit is not None:
        d = fit.to_dict(max_rows=0)
        loo = d["leave_one_out_median_abs_pct"]
        c.print(f"step time calibrated on {d['log']} ({d['observations']} lines, MAPE {d['mape_pct']} %, median "
                f"{d['in_sample_median_abs_pct']} % in sample, {'-' if loo is None else loo} % leave-one-out)")
        rows = fit.rows
        if rows and first.result is not None:
            gen = sum(r.gen_tps for r in rows) / len(rows)
            run = sum(r.running for r in rows) / len(rows)
            cur = first.result
            c.print(f"calibration point: the log served {gen:,.0f} tok/s with {run:,.0f} running; the {first.name} "
                    f"launch simulated on this workload: {cur.steady_gen_tps or cur.gen_tps:,.0f} tok/s with "
                    f"{cur.running_mean:,.0f} running")
    if res.current.refused:
        c.print(f"[bold red]current launch[/]: {res.current.refused}", highlight=False)
    t = Table(title="launches ranked by predicted generation throughput (steady state), on the GPUs given")
    for col in ("", "lever", "gen tok/s", "p99 e2e", "p99 TTFT", "running", "preempted", "KV tokens / replica",
                "/ rank"):
        t.add_column(col, justify="right" if col not in ("", "lever") else "left")
    shown = [*([] if res.current.refused else [res.current]), *res.ranked[:top]]

    def row(mark: str, cand: Any) -> None:
        p = cand.to_dict()["predicted"] or {}
        tps = p.get("steady_gen_tps") or p.get("gen_tps")
        kv = f"{cand.kv_tokens_replica:,}" if cand.kv_tokens_replica else "-"
        if cand.replicas > 1:
            kv += f" ×{cand.replicas}"
        t.add_row(mark, cand.name, f"{tps:,.0f}" if tps is not None else "-", _fmt_s(p.get("e2e_p99_s")),
                  _fmt_s(p.get("ttft_p99_s")), f"{p.get('running_mean', 0):,.0f}",
                  f"{p.get('preempted_requests', 0):,}", kv, f"{cand.kv_tokens:,}" if cand.kv_tokens else "-")

    for i, cand in enumerate(shown):
        row("now" if cand is res.current else str(i if not res.current.refused else i + 1), cand)
    c.print(t)
    for i, cand in enumerate(res.ranked[:top], 1):
        c.print(f"[bold]{i}. {cand.name}[/bold]: {cand.command}", soft_wrap=True, highlight=False)
        if cand.note:
            c.print(f"   [dim]{cand.note}[/dim]")
    if res.more_gpus:
        m = Table(title="not ranked: they need more GPUs than the cluster given")
        for col in ("lever", "GPUs needed", "gen tok/s", "running", "KV tokens / replica"):
            m.add_column(col, justify="left" if col == "lever" else "right")
        for cand in res.more_gpus:
            p = cand.to_dict()["predicted"] or {}
            tps = p.get("steady_gen_tps") or p.get("gen_tps")
            kv = f"{cand.kv_tokens_replica:,}" + (f" ×{cand.replicas}" if cand.replicas > 1 else "")
            m.add_row(cand.name, f"{cand.gpus_needed}", f"{tps:,.0f}" if tps is not None else "-",
                      f"{p.get('running_mean', 0):,.0f}", kv)
        c.print(m)
    for cand in res.refused:
        c.print(f"[dim]refused by check: {cand.name}: {cand.refused}[/dim]")
    for n in res.notes:
        c.print(f"[dim]{n}[/dim]")


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:,.0f} s"
