"""Horizontal bar lists: diagnose's levers (one chart per figure, ``current`` marked) and explain's log vs plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.report.html import fmt
from kvplan.report.html.svg import WIDTH, Scale, Svg

BAR_H, GAP, TOP, LEFT, RIGHT = 18, 6, 40, 190, 110
CURRENT, OTHER, LOG, PLAN = "#333333", "#55a868", "#8c8c8c", "#4c72b0"


@dataclass(frozen=True)
class Bar:
    key: str
    label: str
    value: float | None
    text: str  # the figure as printed
    color: str


def bar_chart(id_: str, title: str, bars: list[Bar], marker: float | None = None,
              marker_label: str = "") -> Svg:
    svg = Svg(id=id_, height=TOP + len(bars) * (BAR_H + GAP) + 8)
    svg.text(8, 16, title, size=12, font_weight="bold", class_="chart-title")
    hi = max([abs(b.value) for b in bars if b.value is not None] + [1e-9])
    x = Scale(0, hi, LEFT, WIDTH - RIGHT)
    for i, b in enumerate(bars):
        y = TOP + i * (BAR_H + GAP)
        svg.text(LEFT - 8, y + BAR_H * 0.72, b.label, anchor="end", class_="row-label")
        if b.value is None:
            svg.text(LEFT + 4, y + BAR_H * 0.72, "n/a", fill="#777", class_="bar-value", data_key=b.key)
            continue
        w = x(abs(b.value)) - LEFT
        svg.rect(LEFT, y, w, BAR_H, b.color, title=f"{b.label}: {b.text}", class_="bar", data_key=b.key,
                 data_value=b.value)
        svg.text(LEFT + w + 6, y + BAR_H * 0.72, b.text, class_="bar-value", data_key=b.key)
    if marker is not None:
        xm = x(abs(marker))
        svg.line(xm, TOP - 6, xm, svg.height - 4, stroke=CURRENT, width=1.5, stroke_dasharray="4 3",
                 class_="mark", data_key="current")
        svg.text(xm + 4, TOP - 9, marker_label, size=10, fill=CURRENT, class_="mark-label")
    return svg


def lever_charts(levers: list[dict[str, Any]]) -> list[Svg]:
    """Three charts (KV tokens, requests, expected gen tok/s), one bar per lever; ``current`` dark and marked."""
    specs = [("kv_tokens", "KV tokens per replica (anchored on the server's own pool)", fmt.count),
             ("requests", "requests of the observed length that fit at once (all replicas)", fmt.count),
             ("expected_gen_tps", "expected generation throughput (tokens/s, all replicas)", lambda v: fmt.num(v))]
    out = []
    for key, title, f in specs:
        bars = [Bar(lv["name"], lv["name"], lv.get(key), f(lv.get(key)),
                    CURRENT if lv["name"] == "current" else OTHER) for lv in levers]
        cur = next((lv.get(key) for lv in levers if lv["name"] == "current"), None)
        out.append(bar_chart(f"lever-{key.replace('_', '-')}", title, bars, cur, "current"))
    return out


def comparison_chart(comparisons: list[dict[str, Any]]) -> Svg:
    """Explain: per figure two bars, the log's and the plan's, each figure on its own scale."""
    rows = [c for c in comparisons if isinstance(c.get("observed"), (int, float))
            or isinstance(c.get("predicted"), (int, float))]
    pair_h = 2 * BAR_H + 14
    svg = Svg(id="explain-chart", height=TOP + len(rows) * pair_h + 8)
    svg.text(8, 16, "log vs plan, per figure (each figure on its own scale)", size=12, font_weight="bold",
             class_="chart-title")
    for i, c in enumerate(rows):
        y = TOP + i * pair_h
        obs, pred = c.get("observed"), c.get("predicted")
        hi = max(abs(v) for v in (obs, pred) if isinstance(v, (int, float))) or 1.0
        x = Scale(0, hi, LEFT, WIDTH - RIGHT - 60)
        svg.text(LEFT - 8, y + BAR_H * 0.72, c["field"], anchor="end", class_="row-label", font_weight="bold")
        svg.text(LEFT - 8, y + BAR_H * 1.72, c.get("scope", ""), anchor="end", class_="row-label", fill="#666")
        for j, (who, v, color) in enumerate((("log", obs, LOG), ("plan", pred, PLAN))):
            yy = y + j * (BAR_H - 2)
            if not isinstance(v, (int, float)):
                svg.text(LEFT + 4, yy + BAR_H * 0.62, f"{who}: n/a", size=10, fill="#777")
                continue
            w = x(abs(v)) - LEFT
            svg.rect(LEFT, yy, w, BAR_H - 4, color, title=f"{c['field']} {who}: {v:,}", class_="bar",
                     data_key=f"{c['field']}:{who}", data_value=v)
            svg.text(LEFT + w + 6, yy + BAR_H * 0.62, f"{who} {_n(v)}", size=10, class_="bar-value",
                     data_key=f"{c['field']}:{who}")
        ok = c.get("within_rounding")
        mark = "✓" if ok else ("✗" if ok is False else "")
        err = c.get("error_pct")
        svg.text(WIDTH - 8, y + BAR_H, f"{mark} {fmt.pct(err, 2) if err is not None else ''}", anchor="end",
                 fill="#2ca02c" if ok else ("#d62728" if ok is False else "#777"), class_="cmp-verdict",
                 data_key=c["field"])
    return svg


def _n(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) or float(v).is_integer() else f"{v:,.3f}"
