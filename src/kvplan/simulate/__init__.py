"""``kvplan simulate`` / ``kvplan tune``: what a launch does to a workload, from the engine's own scheduler.

launch (Plan -> LaunchInputs, the one adapter) · workload/ (generated, JSONL, benchmark results) · core/ (requests,
closed-form decode batch, prefix cache + host tier, one scheduler instance, the cluster event loop, metrics) ·
policy/ (per engine: knobs, scheduler, scheduler levers; chosen by ``Engine.scheduler_policy``) · engine_levers
(the launch levers of ``Engine.levers``, priced where check finds them safe) · steptime/ (roofline prior, step
model, calibration from serving logs) · run / result / report / tune (the CLI: kvplan.cli.simulate, kvplan.cli.tune).
"""

from __future__ import annotations

from typing import Any


def simulate(command: Any, workload: Any, calibrate: str | None = None, mem_bw_gbps: float | None = None,
             tflops: float | None = None, router: str = "round-robin", host_bw_gbps: float | None = None,
             calibrate_launch: str | None = None, **options: Any) -> Any:
    """Simulate ``workload`` (simulate.workload.Workload) on the launch ``command`` (argv, a string, or the
    CheckResult of ``kvplan.check``, whose plan names its command); ``options`` are check's; ``calibrate_launch``:
    the launch the ``calibrate`` log came from (default: as the log shows it)."""
    from kvplan.simulate.run import run_simulation
    from kvplan.simulate.session import prepare

    if hasattr(command, "plan"):
        command = command.plan.command
    ses = prepare(command, options, calibrate, mem_bw_gbps, tflops, calibrate_launch)
    return run_simulation(ses.inputs, workload, ses.model_for(ses.inputs), router, host_bw_gbps)


__all__ = ["simulate"]
