"""Rich report for people: the bottleneck, the evidence that decided it, and the levers table."""

from __future__ import annotations

from typing import Any

from kvplan.diagnose.run import DiagnoseResult

STYLE = {"kv-capacity": "bold white on red", "host-tier": "bold white on red", "prefix-miss": "bold black on yellow",
         "compute-bound": "bold black on yellow", "running-cap": "bold black on yellow",
         "client-bound": "bold white on green", "unknown": "bold white on blue"}


def _n(v: Any, fmt: str = ",.0f") -> str:
    return "—" if v is None else format(v, fmt)


def render(res: DiagnoseResult, console: Any = None) -> None:
    from rich.table import Table

    from kvplan.report.console import console as make_console

    con = console or make_console()
    d, o = res.to_dict(), res.observed
    src = " + ".join(f"{k} {v}" for k, v in res.sources.items() if v and k in ("url", "log"))
    con.print(f"[bold]kvplan diagnose[/] · {res.engine or '?'} {res.engine_version or ''} · {src}", highlight=False)
    con.print(f"bottleneck: [{STYLE.get(d['bottleneck'], 'bold')}] {d['bottleneck']} [/] {d['cause']}")
    for e in d["evidence"]:
        con.print(f"  · {e}", highlight=False)
    con.print(f"  [green]fix:[/] {d['fix']}")
    lean = "leans to" if d["bottleneck"] == "unknown" else "also"  # a thin window: what it leans to, not a verdict
    for s in d["secondary"]:
        con.print(f"[dim]{lean} {s['id']}: {s['cause']}[/]")
    avg = o.get("avg_tokens")
    t = Table(title="Levers (KV tokens per replica; requests, tok/s: all replicas)",
              title_justify="left")
    for col, right in (("lever", False), ("KV tokens", True), ("Δ KV", True), (f"requests of {_n(avg)} tok", True),
                       ("gen tok/s", True)):
        t.add_column(col, justify="right" if right else "left")
    for lv in res.levers:
        delta = "" if lv.name == "current" or lv.kv_delta_pct is None else f"{lv.kv_delta_pct:+.0f} %"
        kv = _n(lv.kv_tokens) + (f" ×{lv.replicas}" if lv.replicas > 1 else "")
        t.add_row(lv.name, kv, delta, _n(lv.requests), _n(lv.expected_gen_tps))
    if res.levers:
        con.print(t)
        con.print(f"[dim]gen tok/s: {res.levers[0].gen_tps_basis}[/]", highlight=False)
        for lv in res.levers:
            errs = [f for f in lv.findings if f.endswith("(error)")]
            change = f" ({lv.change})" if lv.change else ""
            con.print(f"[dim]{lv.name}{change}: {'; '.join(lv.notes + errs)}[/]", highlight=False)
    cmds = [lv for lv in res.levers[1:] if lv.command]
    if cmds:
        con.print("\n[bold]fixed launch commands[/]")
        for lv in cmds:
            where = f" (×{lv.replicas}, on {lv.gpus_needed} GPUs)" if lv.gpus_needed else ""
            con.print(f"[cyan]{lv.name}[/]{where}: {lv.command}", soft_wrap=True, highlight=False)
    elif res.levers:
        con.print("[dim]no launch command known: pass --launch-command to get the fixed commands[/]")
    for n in res.notes:
        con.print(f"[dim]· {n}[/]", highlight=False)
