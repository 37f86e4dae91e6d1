"""Rich view of ``kvplan explain``: log vs plan, with the rounding each comparison allows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.explain import ExplainResult


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def render_explain(res: ExplainResult, console: Any = None) -> None:
    from rich.table import Table

    from kvplan.report.console import console as make_console

    con = console or make_console()
    f = res.facts
    con.print(f"[bold]kvplan explain[/] · {res.engine} {res.engine_version} [dim]({res.version_source})[/]")
    con.print(f"[dim]{f.lines_read:,} lines read, {f.lines_matched:,} recognised; rebuilt launch: {res.command}[/]")
    if res.unsupported:
        con.print(f"[yellow]cannot plan this launch:[/] {res.unsupported}")
    t = Table(title="Log vs plan", title_justify="left")
    for col in ("figure", "scope", "log says", "kvplan", "error", ""):
        t.add_column(col, justify="right" if col in ("log says", "kvplan", "error") else "left")
    if res.check is None:  # nothing planned: still show what the log says
        for k, v in res.observed().items():
            if v is not None and not isinstance(v, (list, dict)):
                t.add_row(k, "log", _fmt(v), "—", "—", "")
    for c in res.comparisons:
        err = "—" if c.error_pct is None else f"{c.error_pct:+.2f} %"
        mark = "" if c.ok is None else ("[green]within rounding[/]" if c.ok else "[red]differs[/]")
        t.add_row(c.field, c.scope, _fmt(c.observed), _fmt(c.predicted), err, mark)
    con.print(t)
    for c in res.comparisons:
        if c.ok is False and c.note:
            con.print(f"[red]{c.field}[/]: {c.note}")
    for m in res.missing:
        con.print(f"[yellow]missing from the log:[/] {m}")
    for e in f.errors[:5]:
        con.print(f"[red]log error:[/] {e}")
    if res.check is not None:
        from kvplan.report.human import render_findings

        render_findings(res.check, con)  # as check prints them: fix lines, the suggested command
