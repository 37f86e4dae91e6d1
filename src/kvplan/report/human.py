"""Rich tables for people. Every row names its scope (per rank / per node / per replica) and unit."""

from __future__ import annotations

from typing import Any

from kvplan.result import CheckResult
from kvplan.units import fmt_gib, fmt_host

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
VERDICT_STYLE = {"fail": "bold white on red", "warn": "bold black on yellow", "ok": "bold white on green"}


def render(result: CheckResult, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    p, n, rep, s = result.plan, result.plan.per_node, result.plan.per_replica, result.plan.settings
    c = p.cluster
    con.print(f"[bold]kvplan check[/] · {p.engine} {p.engine_version} [dim]({p.version_source})[/] · "
              f"{p.model.name} [dim]({p.model.architecture}, {p.model.attention})[/]")
    con.print(f"[dim]{c.gpu} · {c.gpu_mem_mib:,} MiB per GPU ({c.gpu_source}) · "
              f"{c.gpus_per_node} GPUs per node × {c.nodes} node(s) · host {c.host_mem_gib:,} GiB "
              f"({c.host_mem_source})[/]")

    t = Table(title=f"Per rank (each of {s.world_size} ranks)", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_column("how", style="dim")
    from kvplan.engines import get_engine

    for row in get_engine(p.engine).report_rows(p):
        t.add_row(*row)
    con.print(t)

    t = Table(title="Per node", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("GPU ranks of this launch", f"{n.ranks}")
    if n.host_kv_bytes:
        over = n.host_kv_bytes > n.host_available_bytes - n.host_reserve_bytes
        style = "bold red" if over else ""
        t.add_row("host KV requested (all ranks)", f"[{style}]{fmt_host(n.host_kv_bytes)}[/]" if style else
                  fmt_host(n.host_kv_bytes))
        t.add_row("host memory available", fmt_host(n.host_available_bytes))
        t.add_row("engine host reserve", fmt_gib(n.host_reserve_bytes))
    if n.shm_bytes is not None and p.cluster.host_mem_source.startswith("detected"):
        t.add_row("/dev/shm (this machine)", fmt_gib(n.shm_bytes))
    con.print(t)

    t = Table(title="Per replica", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("GPU ranks / DP attention groups", f"{rep.ranks} / {rep.dp_groups}")
    t.add_row("distinct KV tokens on GPU", f"{rep.kv_tokens:,}")
    t.add_row(f"requests of {rep.avg_tokens:,} tokens that fit at once", f"{rep.requests_fit:,}")
    if rep.replicas > 1:
        t.add_row("replicas in this launch (--dp)", f"{rep.replicas}")
    con.print(t)

    for f in result.findings:
        con.print(f"[{SEV_STYLE[f.severity]}]{f.severity.upper():7}[/] [bold]{f.id}[/]: {f.message}")
        con.print(f"         [green]fix:[/] {f.fix}")
    if result.suggested_command:
        con.print("\n[bold]suggested command[/]")
        con.print(result.suggested_command, soft_wrap=True, highlight=False)
        sp = result.suggested_plan
        if sp is not None:
            con.print(f"[dim]→ {sp.per_rank.kv_tokens:,} KV tokens per rank; host KV "
                      f"{fmt_host(sp.per_node.host_kv_bytes)} per node[/]")
    for a in p.assumptions:
        con.print(f"[dim]· {a}[/]")
    con.print(f"verdict: [{VERDICT_STYLE[result.verdict]}] {result.verdict.upper()} [/]")
