"""The fleet at a glance, from the replicas' JSON only: replicas per bottleneck, per deployment (job and model),
and the levers that would help most across the replicas whose bottleneck is the launch's.

A lever helps a replica by what it was priced at against that replica's ``current`` row (``diagnose --url``'s
figures): generation tok/s, requests that fit, KV tokens (times the lever's copies). Levers are summed by name over
the replicas with a launch bottleneck (every bottleneck but ``client-bound``, whose fix is the client, and
``unknown``, which names none) and ranked by tok/s gained, then requests, then KV tokens; each keeps its price:
the replicas it was priced on, its changes (flags) as priced, and the GPUs it needs beyond the cluster given.
"""

from __future__ import annotations

from typing import Any

NOT_LAUNCH = ("client-bound", "unknown")
BASE_ROWS = ("current", "repaired", "given launch")
MAX_CHANGES = 3


def _gain(a: Any, b: Any) -> float | None:
    return None if a is None or b is None else float(a) - float(b)


def _levers(replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for r in replicas:
        levers = r.get("levers") or []
        if r.get("bottleneck") in NOT_LAUNCH or not levers or levers[0].get("name") != "current":
            continue
        cur = levers[0]
        for lv in levers[1:]:
            if lv["name"] in BASE_ROWS:
                continue
            s = by.setdefault(lv["name"], {"name": lv["name"], "replicas": [], "bottlenecks": {}, "changes": [],
                                           "gen_tps_gain": 0.0, "requests_gain": 0, "kv_tokens_gain": 0,
                                           "gpus_needed": 0, "with_command": 0})
            s["replicas"].append(r["instance"])
            s["bottlenecks"][r["bottleneck"]] = s["bottlenecks"].get(r["bottleneck"], 0) + 1
            if lv.get("change") and lv["change"] not in s["changes"] and len(s["changes"]) < MAX_CHANGES:
                s["changes"].append(lv["change"])
            tps = _gain(lv.get("expected_gen_tps"), cur.get("expected_gen_tps"))
            req = _gain(lv.get("requests"), cur.get("requests"))
            kv = None if lv.get("kv_tokens") is None or cur.get("kv_tokens") is None else \
                lv["kv_tokens"] * max(1, lv.get("replicas") or 1) - cur["kv_tokens"]
            s["gen_tps_gain"] += tps or 0.0
            s["requests_gain"] += int(req or 0)
            s["kv_tokens_gain"] += int(kv or 0)
            s["gpus_needed"] += int(lv.get("gpus_needed") or 0)
            s["with_command"] += bool(lv.get("command"))
    out = sorted(by.values(), key=lambda s: (-s["gen_tps_gain"], -s["requests_gain"], -s["kv_tokens_gain"],
                                              s["name"]))
    for s in out:
        s["gen_tps_gain"] = round(s["gen_tps_gain"], 1)
    return out


def _deployments(replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[tuple[str, str], dict[str, Any]] = {}
    for r in replicas:
        key = (r.get("job") or "", r.get("model") or "")
        d = by.setdefault(key, {"job": key[0] or None, "model": key[1] or None, "engine": r.get("engine"),
                                "replicas": 0, "instances": [], "bottlenecks": {}})
        d["replicas"] += 1
        d["instances"].append(r["instance"])
        d["bottlenecks"][r["bottleneck"]] = d["bottlenecks"].get(r["bottleneck"], 0) + 1
    return [by[k] for k in sorted(by)]


def summarize(replicas: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in replicas:
        counts[r["bottleneck"]] = counts.get(r["bottleneck"], 0) + 1
    return {"replicas": len(replicas), "bottlenecks": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
            "deployments": _deployments(replicas), "levers": _levers(replicas)}
