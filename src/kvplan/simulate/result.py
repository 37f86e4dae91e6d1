"""What a simulation predicts, with units in the names, and its JSON (``kvplan simulate --json``, schema 1).

Throughput is over the makespan (first arrival to last finish) and, for jobs of 10+ requests, in steady state
(between the 10 % and 90 % completions, where a long job spends its time). Latencies are per request, from its
arrival: ``ttft_s`` to the first token, ``tpot_s`` per later token, ``e2e_s`` to the last, ``queue_s`` until first
admitted. Running/queued are summed over all scheduler instances, time-weighted. Host-tier traffic is bytes per
rank (every rank of a scheduler moves its own shard).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SimResult:
    launch: dict[str, Any]
    workload: dict[str, Any]
    step_model: dict[str, Any]
    completed: int
    aborted: int
    makespan_s: float
    gen_tps: float
    prompt_tps: float
    steady_gen_tps: float | None
    ttft_s: dict[str, Any]
    tpot_s: dict[str, Any]
    e2e_s: dict[str, Any]
    queue_s: dict[str, Any]
    running_mean: float
    queued_mean: float
    kv_usage_mean: float
    inflight_tokens_per_request: float | None
    preempted_requests: int
    preemption_events: int
    prefix_hit_rate: float | None
    host: dict[str, Any]
    series: list[dict[str, Any]] = field(repr=False)
    sim: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    measured: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "launch": self.launch, "workload": self.workload,
                "step_model": self.step_model,
                "throughput": {"gen_tps": round(self.gen_tps, 2), "prompt_tps": round(self.prompt_tps, 2),
                               "steady_gen_tps": None if self.steady_gen_tps is None else round(self.steady_gen_tps,
                                                                                                2)},
                "latency": {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
                            "queue_s": self.queue_s},
                "load": {"running_mean": round(self.running_mean, 2), "queued_mean": round(self.queued_mean, 2),
                         "kv_usage_mean": round(self.kv_usage_mean, 4),
                         "inflight_tokens_per_request": None if self.inflight_tokens_per_request is None
                         else round(self.inflight_tokens_per_request, 1)},
                "scheduler": {"preempted_requests": self.preempted_requests,
                              "preemption_events": self.preemption_events,
                              "prefix_hit_rate": None if self.prefix_hit_rate is None else round(self.prefix_hit_rate,
                                                                                                 4)},
                "host_tier": self.host, "completed": self.completed, "aborted": self.aborted,
                "makespan_s": round(self.makespan_s, 3), "series": self.series, "sim": self.sim,
                "notes": list(self.notes), "measured": self.measured}


def _means(points: list[dict[str, Any]]) -> tuple[float, float, float]:
    tot = r = q = u = 0.0
    for i, p in enumerate(points):
        if p["running"] is None:
            continue
        nxt = points[i + 1]["t"] if i + 1 < len(points) else None
        w = (nxt - p["t"]) if nxt is not None else 1.0
        tot += w
        r += p["running"] * w
        q += p["queued"] * w
        u += p["kv_usage"] * w
    return (r / tot, q / tot, u / tot) if tot else (0.0, 0.0, 0.0)


def build_result(inputs: Any, workload: Any, model: Any, sink: Any, cluster: Any, wall_s: float,
                 host_bw_gbps: float) -> SimResult:
    makespan = max(0.0, sink.last_t - (sink.first_t or 0.0))
    gen_tps = sink.gen_tokens / makespan if makespan else 0.0
    prompt_tps = sink.prompt_tokens / makespan if makespan else 0.0
    steady = None
    if "10%" in sink.mark and "90%" in sink.mark:
        (t1, g1), (t2, g2) = sink.mark["10%"], sink.mark["90%"]
        steady = (g2 - g1) / (t2 - t1) if t2 > t1 else None
    series = sink.series.points(sum_over=inputs.instances)
    _, _, use_m = _means(series)
    run_m = sink.running_area / makespan if makespan else 0.0
    que_m = sink.queued_area / makespan if makespan else 0.0
    # KV tokens held per running request, time-weighted (what the log's #token / #running-req shows)
    inflight = sink.held_token_area / sink.running_area if sink.running_area else None
    looked = sink.lookup_tokens
    kvb = inputs.kv_bytes_per_token
    host = {"enabled": bool(inputs.host_kv_tokens), "host_kv_tokens_per_instance": inputs.host_kv_tokens,
            "bandwidth_gbps": round(host_bw_gbps, 1)}
    wt = wb = ld = 0
    for inst in cluster.instances:
        wt += inst.cache.host_write_tokens
        wb += inst.cache.host_writeback_tokens
        ld += inst.cache.host_load_tokens
    host.update({"write_through_bytes_per_rank": wt * kvb, "write_back_bytes_per_rank": wb * kvb,
                 "load_back_bytes_per_rank": ld * kvb,
                 "write_gbps_per_rank": round((wt + wb) * kvb / makespan / 1e9, 3) if makespan else 0.0,
                 "host_hit_tokens": sink.host_hit_tokens})
    notes = []
    if inputs.dp_groups > 1:
        notes.append(f"{inputs.dp_groups} DP-attention groups are simulated as independent schedulers fed round "
                     "robin; their lock-step MoE layers are priced by the step model (experts touched by all groups)")
    return SimResult(
        launch=inputs.summary(), workload=workload.summary(), step_model=model.to_dict(), completed=sink.done,
        aborted=sink.aborted, makespan_s=makespan, gen_tps=gen_tps, prompt_tps=prompt_tps, steady_gen_tps=steady,
        ttft_s=sink.ttft.summary(), tpot_s=sink.tpot.summary(), e2e_s=sink.e2e.summary(),
        queue_s=sink.queue.summary(), running_mean=run_m, queued_mean=que_m, kv_usage_mean=use_m,
        inflight_tokens_per_request=inflight,
        preempted_requests=sink.preemptions, preemption_events=sink.preempt_events,
        prefix_hit_rate=(sink.cached_tokens / looked) if looked else None, host=host, series=series,
        sim={"wall_s": round(wall_s, 3), "events": cluster.events,
             "speedup_vs_real_time": round(makespan / wall_s, 1) if wall_s else None},
        notes=tuple(notes), measured=workload.measured)
