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
    log_launch: Any = None  # simulate.loglaunch.LogLaunch: the log's own launch and what is taken from it

    def calibration_dict(self, max_rows: int = 50) -> dict | None:
        """The fit's JSON with ``launch``: the log's own launch and whether its pool anchors this one."""
        if self.fit is None:
            return None
        return {**self.fit.to_dict(max_rows), "launch": self.log_launch.to_dict() if self.log_launch else None}

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

        pool = self.anchor.observed_tokens or (self.calibration_launch.kv_tokens if self.calibration_launch
                                               is not None else None)
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

    def alternative_for(self, inputs: LaunchInputs) -> tuple[str, StepModel] | None:
        """The step model at the other end of what the log leaves open (None: the fit identifies every term)."""
        if self.fit is None or self.fit.alternative is None:
            return None
        what, alt = self.fit.alternative
        return what, StepModel(roofline_for(inputs, self.mem_bw_gbps, self.tflops), alt.coef, alt.source)

    def model_for(self, inputs: LaunchInputs) -> StepModel:
        roof = roofline_for(inputs, self.mem_bw_gbps, self.tflops)
        if self.fit is not None:
            return StepModel(roof, self.fit.model.coef, self.fit.model.source)
        if not roof.known:
            raise KvplanError(f"no step-time prior: {roof.hardware_source}",
                              "pass --calibrate LOG (a serving log of this model), or --mem-bw-gbps and --tflops")
        return StepModel(roof)


def band(point: Any, other: Any, what: str) -> dict:
    """The prediction's band: the point simulation and the one at the other end of what the calibration log leaves
    open (steptime/identify.py), as (low, high) of each throughput figure."""
    def pair(name: str) -> list[float] | None:
        a, b = getattr(point, name), getattr(other, name)
        return None if a is None or b is None else [round(min(a, b), 2), round(max(a, b), 2)]

    return {"gen_tps": pair("gen_tps"), "steady_gen_tps": pair("steady_gen_tps"), "other_end": what}


def prepare(command: Sequence[str] | str, options: dict[str, Any], calibrate_log: str | None = None,
            mem_bw_gbps: float | None = None, tflops: float | None = None,
            calibrate_launch: str | None = None) -> Session:
    """The launch planned, and the step model fitted to ``calibrate_log``. The simulated launch is the user's: the
    log's pool anchors it only when the log's own launch (``calibrate_launch``, else the launch the log shows) is
    known and its plan holds the pool the log reported (simulate/loglaunch.py); the log's lines are read with the
    log's own pool."""
    from dataclasses import replace

    from kvplan.simulate.launch import inputs_from
    from kvplan.simulate.loglaunch import differs, judge, plan_log_launch

    for name, v in (("--mem-bw-gbps", mem_bw_gbps), ("--tflops", tflops)):
        if v is not None and not v > 0:
            raise KvplanError(f"{name} must be > 0, got {v}")
    if calibrate_launch and not calibrate_log:
        raise KvplanError("--calibrate-launch names the launch of a calibration log", "give the log with --calibrate")
    if not calibrate_log:
        return Session(plan_launch(command, options), None, None, None, mem_bw_gbps, tflops)
    anchor = read_anchor(calibrate_log)
    log_launch, given_by, why_not = plan_log_launch(calibrate_launch, anchor, options)
    verdict = judge(log_launch, anchor.observed_tokens, given_by, why_not)
    taken = tuple((k, v) for k, v in (("engine_version", anchor.version), ("free_gib", anchor.free_gib))
                  if v is not None and options.get(k) is None)  # launch._options: what the log measured
    # the launch's own plan (the log still gives the engine version and the free memory it measured)
    inputs = plan_launch(command, options, replace(anchor, observed_tokens=None))
    verdict = replace(verdict, taken=taken)
    other = differs(log_launch, inputs) if verdict.pool_carried and log_launch is not None else None
    if other:
        verdict = replace(verdict, pool_carried=False, reason=other)
    if verdict.pool_carried and log_launch is not None:
        inputs = inputs_from(inputs.evaluation, inputs.options, log_launch.anchor)
    elif anchor.observed_tokens is not None:
        inputs = replace(inputs, kv_source=f"{inputs.kv_source}; the calibration log's pool is not used: "
                         f"{verdict.reason}")
    roof = roofline_for(log_launch or inputs, mem_bw_gbps, tflops)
    log_pool = anchor.observed_tokens or (log_launch or inputs).kv_tokens  # the log's lines read with its own pool
    fit = calibrate(calibrate_log, roof, log_pool, anchor.decode_interval)
    return Session(inputs, fit, anchor, log_launch, mem_bw_gbps, tflops, verdict)
