"""A simulation session: the launch planned (and anchored on the user's log), and the step model for any Plan.

``prepare`` does the work shared by ``kvplan simulate`` and ``kvplan tune``: plan the command, read the log's
startup facts and plan the launch the log came from (the calibration point), fit the step model to the log's
serving lines, and return ``model_for(inputs)``: the step model of any launch (its own roofline, the fitted
coefficients). Without a log the roofline prior is used, which needs the GPU's figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.errors import KvplanError
from kvplan.simulate.launch import LaunchInputs, LogAnchor, plan_launch, read_anchor
from kvplan.simulate.steptime.calibrate import Fit, calibrate
from kvplan.simulate.steptime.model import StepModel
from kvplan.simulate.steptime.prior import roofline_for

WORKLOAD_TOLERANCE = 0.25
AGREE = 0.05  # a workload within 5 % of the log's KV tokens per running request agrees with it
STEADY_WEIGHT = 0.5  # a line whose batch was known over its interval (steptime/observe.py: weight 1 when it held)
BATCH_TOLERANCE = 0.25  # how far outside the log's steady batches a simulated batch is still read as inside


@dataclass(frozen=True)
class Session:
    inputs: LaunchInputs
    fit: Fit | None
    anchor: LogAnchor | None
    calibration_launch: LaunchInputs | None
    mem_bw_gbps: float | None = None
    tflops: float | None = None

    def workload_check(self, res: Any) -> str | None:
        """The log's KV tokens per running request vs the simulated workload's: the pool holds as many requests as
        fit, so a workload whose requests are longer in flight than the log's predicts fewer running. Said whenever
        they differ by more than ``AGREE`` (the figures follow the workload simulated); past ``WORKLOAD_TOLERANCE``
        the workload is not the log's."""
        log = self.fit.inflight_tokens if self.fit is not None else None
        sim = res.inflight_tokens_per_request
        if not log or not sim or abs(sim / log - 1) <= AGREE:
            return None
        diff = f"{sim / log - 1:+.0%}"
        if abs(sim / log - 1) <= WORKLOAD_TOLERANCE:
            return (f"the log held {log:,.0f} KV tokens per running request, the simulated workload {sim:,.0f} "
                    f"({diff}): the figures follow the workload simulated (a pool holds {log / sim:.0%} as many of "
                    "its requests as of the log's)")
        return (f"the log held {log:,.0f} KV tokens per running request, the simulated workload {sim:,.0f} ({diff}): "
                "its requests are not the log's (prompt + half the output is what a request holds on average); the "
                "figures follow the workload simulated, and scale with how many requests fit")

    def check_note(self) -> str | None:
        """When the launch fails kvplan check: it would not run as simulated; the repaired launch would."""
        ev = self.inputs.evaluation
        if ev is None or not ev.errors:
            return None
        return (f"the launch {ev.repair_note()}; simulated as planned, but the engine would not run it so "
                "(kvplan check says why)")

    def inferred_workload(self) -> Any:
        """The workload the calibration log shows (kvplan.simulate.workload.from_log), or None."""
        if self.anchor is None:
            return None
        from kvplan.simulate.workload.from_log import infer

        pool = self.calibration_launch.kv_tokens if self.calibration_launch is not None else None
        return infer(self.anchor.path, pool)

    def coverage_check(self, res: Any) -> str | None:
        """The batch the simulation runs per scheduler vs the batches the log's steady lines saw: outside that range
        (by more than ``BATCH_TOLERANCE``) the step time is the fit's extrapolation, which the prior's shape decides (a
        vLLM-CPU log with steady batches of 4 only priced a 1-request step at 6.6 ms where the engine took 11.6)."""
        if self.fit is None or not res.completed:
            return None
        seen = [r.running for r in self.fit.rows if r.weight >= STEADY_WEIGHT and r.running]
        per_sched = res.running_mean / max(1, self.inputs.instances)
        if not seen:
            return (f"the log has no serving line whose batch held over its interval: the step time at the "
                    f"{per_sched:.1f} requests this simulation runs per scheduler is extrapolated")
        lo, hi = min(seen), max(seen)
        if (1 - BATCH_TOLERANCE) * lo <= per_sched <= (1 + BATCH_TOLERANCE) * hi:
            return None
        ran = f"{lo}" if lo == hi else f"{lo}-{hi}"
        return (f"the log's steady serving lines ran {ran} requests per scheduler, this simulation "
                f"{per_sched:.1f} on average: the step time there is the fit's extrapolation, less sure than inside "
                "the range (a log of the job at that batch pins it)")

    def model_for(self, inputs: LaunchInputs) -> StepModel:
        roof = roofline_for(inputs, self.mem_bw_gbps, self.tflops)
        if self.fit is not None:
            return StepModel(roof, self.fit.model.coef, self.fit.model.source)
        if not roof.known:
            raise KvplanError(f"no step-time prior: {roof.hardware_source}",
                              "pass --calibrate LOG (a serving log of this model), or --mem-bw-gbps and --tflops")
        return StepModel(roof)


def prepare(command: Sequence[str] | str, options: dict[str, Any], calibrate_log: str | None = None,
            mem_bw_gbps: float | None = None, tflops: float | None = None) -> Session:
    for name, v in (("--mem-bw-gbps", mem_bw_gbps), ("--tflops", tflops)):
        if v is not None and not v > 0:
            raise KvplanError(f"{name} must be > 0, got {v}")
    if not calibrate_log:
        return Session(plan_launch(command, options), None, None, None, mem_bw_gbps, tflops)
    anchor = read_anchor(calibrate_log)
    log_launch = None
    if anchor.command:
        try:  # the launch the log shows (its own flags); the pool it reported anchors every other launch
            log_launch = plan_launch(anchor.command, options, anchor)
        except KvplanError:
            log_launch = None
    if log_launch is None:  # the log does not show enough of its launch: it is taken to be the command's
        log_launch = plan_launch(command, options, anchor)
        inputs = log_launch
    else:
        inputs = plan_launch(command, options, anchor, log_launch)
    roof = roofline_for(log_launch, mem_bw_gbps, tflops)
    fit = calibrate(calibrate_log, roof, log_launch.kv_tokens, anchor.decode_interval)
    return Session(inputs, fit, anchor, log_launch, mem_bw_gbps, tflops)
