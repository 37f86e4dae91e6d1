"""Host memory of each node as a stacked bar, read from ``kvplan check --json``.

    each rank's host KV pool (what its allocator pins: per_rank.host_kv_pinned_bytes, or, when the settings list
    host tiers (vLLM), settings.host_tiers[].pinned_per_rank_bytes; a shared /dev/shm region once)
    + the engine's OS reserve (per_node.host_reserve_bytes) + what is left, against per_node.host_available_bytes.
The part of pools + reserve beyond the node's memory is the oversubscription, drawn in red.
"""

from __future__ import annotations

from typing import Any

from kvplan.report.html import fmt
from kvplan.report.html.stacked import Band, Mark, Row, Segment, StackedChart

PALETTE = ("#3182bd", "#6baed6", "#2171b5", "#9ecae1", "#08519c", "#4292c6", "#c6dbef", "#084594")
MAX_NODE_ROWS = 8


def _pools(d: dict[str, Any]) -> list[Segment]:
    r, n, s = d["per_rank"], d["per_node"], d.get("settings") or {}
    out: list[Segment] = []
    if isinstance(s.get("host_tiers"), list):  # the engine lists its host tiers (vLLM: offload, LMCache, swap)
        for t in s["host_tiers"]:
            if t.get("shared"):
                out.append(Segment(f"{t['name']}-shared", f"{t['name']} (one region shared by the node's ranks)",
                                   t["node_bytes"], PALETTE[len(out) % len(PALETTE)], fmt.host(t["node_bytes"]),
                                   t.get("meaning", ""), "shared region"))
                continue
            for i, b in enumerate(t.get("pinned_per_rank_bytes") or []):
                out.append(Segment(f"rank{i}-{t['name']}", f"rank {i} · {t['name']}", b,
                                   PALETTE[i % len(PALETTE)], fmt.host(b), t.get("meaning", ""), f"rank {i}"))
    else:
        for i in range(n["ranks"] if r.get("host_kv_pinned_bytes") else 0):
            b = r["host_kv_pinned_bytes"]
            out.append(Segment(f"rank{i}", f"rank {i} host KV pool", b, PALETTE[i % len(PALETTE)], fmt.host(b),
                               "HiCache, per rank", f"rank {i}"))
    if sum(x.bytes for x in out) != n["host_kv_bytes"]:  # keep the node total the JSON states
        out = [Segment("host_kv", "host KV pools (all ranks of the node)", n["host_kv_bytes"], PALETTE[0],
                       fmt.host(n["host_kv_bytes"]))] if n["host_kv_bytes"] else []
    return out


def host_chart(d: dict[str, Any]) -> StackedChart:
    n = d["per_node"]
    avail, reserve, pools = n["host_available_bytes"], n.get("host_reserve_bytes") or 0, n["host_kv_bytes"]
    segs = _pools(d)
    segs.append(Segment("os_reserve", "OS reserve (the engine keeps it free)", reserve, "#7f7f7f", fmt.gib(reserve),
                        "", "OS reserve"))
    if avail is None:  # a plan for other hardware without --host-mem-gib: the node's memory is not known
        return _unknown_host_chart(d, segs, pools)
    left = avail - reserve - pools
    if left > 0:
        segs.append(Segment("left", "left", left, "#eeeeee", fmt.host(left), "", "left"))
    nodes = int(d["cluster"].get("nodes") or 1)
    rows = tuple(Row(f"node {i}", tuple(segs)) for i in range(min(nodes, MAX_NODE_ROWS)))
    over = None
    summary = [(f"host KV requested {fmt.host(pools)} per node ({n['ranks']} ranks) · node memory available "
                f"{fmt.gib(avail)} ({n.get('host_available_source')}) · OS reserve {fmt.gib(reserve)}", False)]
    if not pools:
        summary.append(("this launch pins no host KV pool", False))
    if left < 0:
        over = Band("oversubscribed", f"oversubscribed by {fmt.host(-left)}", avail, avail - left)
        summary.append((f"{fmt.host(pools)} of host KV against {fmt.gib(avail)}: oversubscribed by "
                        f"{fmt.host(-left)} per node", True))
    legend = [s for s in segs if s.bytes > 0]
    if len(legend) > 10:  # many ranks: one legend line for the ranks
        first = legend[0]
        legend = [Segment("ranks", f"{n['ranks']} rank pools, each", first.bytes, first.color, first.value),
                  *[s for s in legend if not s.key.startswith("rank")]]
    title = f"host memory of each node ({nodes} node{'s' if nodes != 1 else ''}, planned alike)"
    return StackedChart("host-chart", title, rows, tuple(legend), (), (), over,
                        Mark("host_available", f"node memory available {fmt.gib(avail)}", avail, "#111"),
                        tuple(summary))


def _unknown_host_chart(d: dict[str, Any], segs: list[Segment], pools: int) -> StackedChart:
    """The node's pools and reserve without the node's memory (not given): no capacity, nothing judged."""
    n = d["per_node"]
    nodes = int(d["cluster"].get("nodes") or 1)
    rows = tuple(Row(f"node {i}", tuple(segs)) for i in range(min(nodes, MAX_NODE_ROWS)))
    summary = [(f"host KV requested {fmt.host(pools)} per node ({n['ranks']} ranks) · node memory "
                f"{n.get('host_available_source')}: pass --host-mem-gib to check it", False)]
    title = f"host memory of each node ({nodes} node{'s' if nodes != 1 else ''}, planned alike)"
    return StackedChart("host-chart", title, rows, tuple(s for s in segs if s.bytes > 0), (), (), None, None,
                        tuple(summary))
