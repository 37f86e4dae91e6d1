"""Rich report of a fleet: one row per replica, the fleet summary, then each replica's evidence and best lever."""

from __future__ import annotations

from typing import Any

from kvplan.diagnose.report import STYLE

MAX_LEVERS = 8


def _n(v: Any, fmt: str = ",.0f") -> str:
    return "—" if v is None else format(v, fmt)


def _pct(v: Any) -> str:
    return "—" if v is None else f"{v * 100:.0f} %"


def render(d: dict[str, Any], console: Any = None) -> None:
    from rich.table import Table

    from kvplan.report.console import console as make_console

    con = console or make_console()
    f = d["fleet"]
    con.print(f"[bold]kvplan diagnose[/] · Prometheus {d['prometheus']}" + (f" · {{{d['match']}}}" if d["match"]
                                                                          else "") +
              f" · last {d['window_s']:g} s, step {d['step_s']:g} s", highlight=False)
    t = Table(title=f"Replicas ({f['replicas']})", title_justify="left")
    for col, right in (("replica", False), ("engine", False), ("model", False), ("bottleneck", False),
                       ("KV usage", True), ("running", True), ("queued", True), ("gen tok/s", True)):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for r in d["replicas"]:
        o = r["observed"]
        name = r["instance"] + (f" ({r['pod']})" if r.get("pod") and r["pod"] != r["instance"] else "")
        t.add_row(name, r["engine"] or "?", r["model"] or "?",
                  f"[{STYLE.get(r['bottleneck'], 'bold')}] {r['bottleneck']} [/]", _pct(o.get("kv_usage")),
                  _n(o.get("running"), ",.1f"), _n(o.get("queued"), ",.1f"), _n(o.get("gen_tps")))
    con.print(t)
    counts = ", ".join(f"{k} {v}" for k, v in f["bottlenecks"].items())
    con.print(f"[bold]fleet:[/] {f['replicas']} replica(s): {counts}", highlight=False)
    for dep in f["deployments"]:
        bn = ", ".join(f"{k} {v}" for k, v in dep["bottlenecks"].items())
        con.print(f"  deployment job={dep['job'] or '—'} model={dep['model'] or '—'}: {dep['replicas']} "
                  f"replica(s): {bn}", highlight=False)
    if f["levers"]:
        lt = Table(title="Levers that help most (summed over the replicas with a launch bottleneck; vs current)",
                   title_justify="left")
        for col in ("lever", "replicas", "Δ gen tok/s", "Δ requests", "Δ KV tokens", "more GPUs", "change"):
            lt.add_column(col, justify="left" if col in ("lever", "change") else "right", overflow="fold")
        for s in f["levers"][:MAX_LEVERS]:
            lt.add_row(s["name"], str(len(s["replicas"])), f"{s['gen_tps_gain']:+,.0f}", f"{s['requests_gain']:+,}",
                       f"{s['kv_tokens_gain']:+,}", str(s["gpus_needed"] or "—"), "; ".join(s["changes"]))
        con.print(lt)
    for r in d["replicas"]:
        con.print(f"\n[bold]{r['instance']}[/] {r['bottleneck']}: {r['cause']}", highlight=False)
        for e in r["evidence"][:3]:
            con.print(f"  · {e}", highlight=False)
        con.print(f"  [dim]launch: {r['launch_source']}[/]", highlight=False)
        best = _best(r)
        if best is not None:
            con.print(f"  [green]best lever:[/] {best['name']} ({_n(best.get('expected_gen_tps'))} tok/s, "
                      f"{_n(best.get('kv_tokens'))} KV tokens)" +
                      (f": {best['command']}" if best.get("command") else ""), soft_wrap=True, highlight=False)
    for n in d["notes"]:
        con.print(f"[dim]· {n}[/]", highlight=False)
    con.print(f"[dim]{f['requests']} requests to Prometheus, {f['bytes_read']:,} bytes, {f['series']:,} series; "
              f"{f['elapsed_s']:.2f} s[/]", highlight=False)


def _best(r: dict[str, Any]) -> dict[str, Any] | None:
    ok = [lv for lv in r.get("levers") or [] if lv["name"] not in ("current", "repaired", "given launch")
          and not any("(error)" in x for x in lv.get("findings") or [])]
    return max(ok, key=lambda lv: (lv.get("expected_gen_tps") or 0, lv.get("kv_tokens") or 0)) if ok else None
