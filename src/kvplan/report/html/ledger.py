"""The host ledger of one node as two stacked bars (loading, steady), read from ``per_node.host_ledger`` of
``kvplan check --json``: one segment per term that counts toward a phase's peak (page cache is listed in the legend,
not drawn), against the node's budget (its available memory or its container's limit), what does not fit in red."""

from __future__ import annotations

from typing import Any

from kvplan.report.html import fmt
from kvplan.report.html.stacked import Band, Mark, Row, Segment, StackedChart

PALETTE = ("#08519c", "#3182bd", "#6baed6", "#9ecae1", "#31a354", "#74c476", "#fd8d3c", "#fdae6b", "#9e9ac8",
           "#bcbddc", "#636363", "#969696")


def ledger_chart(d: dict[str, Any]) -> StackedChart | None:
    led = (d.get("per_node") or {}).get("host_ledger")
    if not led or not led.get("rows"):
        return None
    colors: dict[str, str] = {}
    legend: list[Segment] = []
    rows = []
    for phase in ("loading", "steady"):
        segs = []
        for r in led["rows"]:
            color = colors.setdefault(r["term"], PALETTE[len(colors) % len(PALETTE)])
            seg = Segment(r["term"], r["what"], r["node_bytes"], color, fmt.host(r["node_bytes"]),
                          f"{r['scope']} × {r['count']}; {r['memory']}; {r['certainty']}: {r['source']}")
            if phase == "steady" and all(x.key != r["term"] for x in legend):
                legend.append(Segment(seg.key, seg.label + (" (reclaimable, not drawn)" if r["memory"] ==
                                                            "page cache" else ""), seg.bytes, color, seg.value,
                                      seg.note))
            if phase in r["phases"] and r["memory"] != "page cache":
                segs.append(seg)
        rows.append(Row(f"{phase}", tuple(segs)))
    budget, peak = led.get("budget_bytes"), led["peak_bytes"]
    summary = [(f"{led['peak_phase']} peak {fmt.host(peak)} per node (loading {fmt.host(led['loading_bytes'])}, "
                f"steady {fmt.host(led['steady_bytes'])})", False)]
    over = cap = None
    if budget is not None:
        summary.append((f"against {fmt.gib(budget)} ({led['budget_source']}): margin {fmt.gib(led['margin_bytes'])}",
                        led["margin_bytes"] < 0))
        cap = Mark("host_budget", f"node budget {fmt.gib(budget)}", budget)
        if peak > budget:
            over = Band("ledger-over", f"over by {fmt.host(peak - budget)}", budget, peak)
    if led.get("held_by_others_bytes") is not None:  # a plan of this machine: its other tenants, beside the budget
        total = f" of {fmt.gib(led['node_total_bytes'])}" if led.get("node_total_bytes") else ""
        summary.append((f"already held by other processes (and the kernel) on this node: "
                        f"{fmt.gib(led['held_by_others_bytes'])}{total} ({led['held_by_others_source']})", False))
    if led.get("pinned_bytes"):
        s, (fast, slow) = led["pin_seconds"], led["pin_seconds_range"]
        summary.append((f"pinning {fmt.host(led['pinned_bytes'])}: about {_dur(s)} ({_dur(fast)}–{_dur(slow)})",
                        s > 300))
    return StackedChart("ledger-chart", "host ledger of one node, by phase", tuple(rows), tuple(legend), (), (), over,
                        cap, tuple(summary))


def _dur(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.1f} min"
