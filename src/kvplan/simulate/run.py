"""Run one simulation: a launch (LaunchInputs) + a workload + a step model -> SimResult.

Instances: ``replicas × dp_groups`` schedulers of the engine's policy, each with the plan's pool of one scheduler.
Host-tier bandwidth (HiCache load-back) defaults to PCIe 5.0 x16 per direction: 32 GT/s × 16 lanes × 128/130 / 8 =
63.0 GB/s (PCI-SIG PCIe 5.0 base specification; https://pcisig.com/specifications); ``--host-bw-gbps`` sets it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from kvplan.simulate.core.cluster import Cluster
from kvplan.simulate.core.sink import Sink
from kvplan.simulate.launch import LaunchInputs
from kvplan.simulate.result import SimResult, build_result
from kvplan.simulate.steptime.model import StepModel
from kvplan.simulate.workload.spec import Workload

PCIE5_X16_GBPS = 32 * 16 * 128 / 130 / 8  # 63.0 GB/s per direction


def run_simulation(inputs: LaunchInputs, workload: Workload, model: StepModel, router: str = "round-robin",
                   host_bw_gbps: float | None = None, max_events: int | None = None,
                   series_width_s: float = 1.0) -> SimResult:
    from kvplan.simulate.policy import policy_for

    pol = policy_for(inputs.engine)
    bw = (host_bw_gbps or PCIE5_X16_GBPS) * 1e9
    sink = Sink(instances=inputs.instances, series_width_s=series_width_s, total_requests=workload.total)
    replicas: list[list[Any]] = []
    n = 0
    for _ in range(inputs.replicas):
        group = []
        for _ in range(inputs.dp_groups):
            group.append(pol.make_instance(n, inputs, model, sink, bw))
            n += 1
        replicas.append(group)
    cluster = Cluster(replicas, sink, workload, router)
    t0 = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # the loop makes no reference cycles: requests are freed by reference counting alone
    try:
        cluster.run(max_events)
    finally:
        if collecting:
            gc.enable()
    for inst in cluster.instances:
        inst.flush()
    wall = time.perf_counter() - t0
    return build_result(inputs, workload, model, sink, cluster, wall, host_bw_gbps or PCIE5_X16_GBPS)
