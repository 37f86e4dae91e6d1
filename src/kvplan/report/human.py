"""Rich tables for people. Every row names its scope (per rank / per node / per replica) and unit.

The first screen answers: the command checked (or built), the verdict, the errors and warnings with their fixes and
the suggested command; then the detail tables, the good-to-know findings and the assumptions, and the verdict again
at the end of a long report."""

from __future__ import annotations

from typing import Any

from kvplan.result import CheckResult
from kvplan.units import fmt_gib, fmt_host

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
VERDICT_STYLE = {"fail": "bold white on red", "warn": "bold black on yellow", "ok": "bold white on green"}


def _table(title: str, columns: tuple[str, ...]) -> Any:
    """A report table whose long values wrap inside their cell (``overflow="fold"``), never cut with an ellipsis."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for name in columns:
        t.add_column(name, justify="right" if name == "value" else "left", overflow="fold",
                     style="dim" if name == "how" else "", no_wrap=False)
    return t


def verdict_line(result: CheckResult) -> str:
    """``verdict: FAIL (2 errors, 2 warnings, 2 info)``."""
    counts = [(sum(f.severity == sev for f in result.findings), sev) for sev in ("error", "warning", "info")]
    said = ", ".join(f"{n} {sev if sev == 'info' else sev + ('s' if n != 1 else '')}" for n, sev in counts if n)
    return (f"verdict: [{VERDICT_STYLE[result.verdict]}] {result.verdict.upper()} [/]"
            + (f" ({said})" if said else ""))


def render(result: CheckResult, console: Any = None, title: str = "kvplan check", command_label: str = "checked"
           ) -> None:
    """The report of a checked launch; ``title`` and ``command_label`` name the front door (``kvplan plan`` prints
    the command it built)."""
    from kvplan.report.console import console as make_console

    con = console or make_console()
    p, n, rep, s = result.plan, result.plan.per_node, result.plan.per_replica, result.plan.settings
    c = p.cluster
    host = c.host_mem_source if c.host_mem_gib is None else f"{c.host_mem_gib:,} GiB ({c.host_mem_source})"
    con.print(f"[bold]{title}[/] · {p.engine} {p.engine_version} [dim]({p.version_source})[/] · "
              f"{p.model.name} [dim]({p.model.architecture}, {p.model.attention})[/]")
    con.print(f"[dim]{c.gpu} · {c.gpu_mem_mib:,} MiB per GPU ({c.gpu_source}) · "
              f"{c.gpus_per_node} GPUs per node × {c.nodes} node(s) · host memory per node {host}[/]")
    con.print(f"[bold]command {command_label}[/]: {p.command}", soft_wrap=True, highlight=False)
    con.print(verdict_line(result))
    render_findings(result, con, ("error", "warning"))
    con.print()

    t = _table(f"Per rank (each of {s.world_size} ranks)", ("what", "value", "how"))
    from kvplan.engines import get_engine

    engine = get_engine(p.engine)
    for row in engine.report_rows(p):
        t.add_row(*row)
    con.print(t)

    t = _table("Per node", ("what", "value", "how"))
    t.add_row("GPU ranks of this launch", f"{n.ranks}", f"{c.gpus_per_node} GPUs per node × {c.nodes} node(s)")
    if n.host_kv_bytes:
        tiers_label, reserve_label = engine.host_node_labels(p)
        usable = n.host_usable_bytes
        over = usable is not None and n.host_kv_bytes > usable
        t.add_row(tiers_label, f"[bold red]{fmt_host(n.host_kv_bytes)}[/]" if over else fmt_host(n.host_kv_bytes),
                  "pinned, summed over the node's ranks")
        avail = "not given" if n.host_available_bytes is None else fmt_host(n.host_available_bytes)
        t.add_row("host memory available", avail, n.host_available_source)
        if n.host_reserve_bytes:
            t.add_row(reserve_label, fmt_gib(n.host_reserve_bytes), "")
    if n.shm_bytes is not None and n.host_available_source.startswith("this machine"):
        t.add_row("/dev/shm (this machine)", fmt_gib(n.shm_bytes), "")
    con.print(t)
    if result.host_ledger is not None:
        from kvplan.report import ledger

        con.print(ledger.table(result.host_ledger, _table))
        for line in ledger.summary(result.host_ledger):
            con.print(line, highlight=False)

    t = _table("Per replica", ("what", "value"))
    t.add_row("GPU ranks / DP attention groups", f"{rep.ranks} / {rep.dp_groups}")
    t.add_row("distinct KV tokens on GPU", f"{rep.kv_tokens:,}")
    t.add_row(f"requests of {rep.avg_tokens:,} tokens that fit at once", f"{rep.requests_fit:,}")
    if rep.replicas > 1:
        t.add_row("replicas in this launch (--dp)", f"{rep.replicas}")
    con.print(t)

    for f, times in _grouped(result.findings, ("info",)):
        _finding(f, con, times)
    for a in p.assumptions:
        con.print(f"[dim]· {a}[/]")
    con.print(verdict_line(result))


def _grouped(findings: Any, severities: tuple[str, ...]) -> list[tuple[Any, int]]:
    """(finding, times) of these severities: the same finding for a repeated flag is printed once, counted."""
    seen: dict[tuple[str, str, str, str], list[Any]] = {}
    for f in findings:
        if f.severity in severities:
            seen.setdefault((f.id, f.severity, f.message, f.fix), []).append(f)
    return [(fs[0], len(fs)) for fs in seen.values()]


def _finding(f: Any, con: Any, times: int = 1) -> None:
    n = f" [dim](× {times:,})[/]" if times > 1 else ""
    con.print(f"[{SEV_STYLE[f.severity]}]{f.severity.upper():7}[/] [bold]{f.id}[/]: {f.message}{n}")
    con.print(f"         [green]fix:[/] {f.fix}")


def render_findings(result: CheckResult, con: Any, severities: tuple[str, ...] = ("error", "warning", "info")
                    ) -> None:
    """The findings of these severities, each with its fix line (a repeated one once, counted), then the suggested
    command (or why none passes): check's report, which ``kvplan explain`` prints the same way for the launch it
    rebuilt."""
    for f, n in _grouped(result.findings, severities):
        _finding(f, con, n)
    if result.suggested_command:
        con.print("\n[bold]suggested command[/]")
        con.print(result.suggested_command, soft_wrap=True, highlight=False)
        sp = result.suggested_plan
        if sp is not None:
            con.print(f"[dim]→ {sp.per_rank.kv_tokens:,} KV tokens per rank; host KV "
                      f"{fmt_host(sp.per_node.host_kv_bytes)} per node[/]")
    if result.suggestion_note:
        con.print(f"\n[bold]no suggested command[/]: {result.suggestion_note}")
