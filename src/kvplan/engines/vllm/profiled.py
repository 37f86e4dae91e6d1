"""The KV budget vLLM derives from ``--gpu-memory-utilization``, term by term, with each term's range.

``available = ceil((nvidia-smi total − reserve) × gmu) − weights − activation peak − non-torch − graphs``
(``calibration.py`` for every figure the code does not fix), per the version's accounting:

- ``whole-device`` (V0 0.6.4 ``worker/worker.py::determine_num_available_blocks``; V1 0.8.0-0.9.0
  ``v1/worker/gpu_worker.py::determine_available_memory``): ``total × gmu − (torch peak + everything on the
  device torch did not allocate)``, the CUDA context (and other processes) included.
- ``snapshot`` (V0 up to 0.6.3: ``init free − free after the profile run``, the caching allocator still holding
  the peak; V0 0.6.5-0.10.x ``utils.py::memory_profiling``; V1 0.9.1-0.10.x): the baseline is taken in
  ``init_device`` before NCCL init, so NCCL / custom all-reduce buffers and BLAS workspaces count as non-torch
  (https://github.com/vllm-project/vllm/blob/v0.6.3.post1/vllm/worker/worker.py,
  https://github.com/vllm-project/vllm/blob/v0.6.6.post1/vllm/worker/worker.py).
- ``after-init`` (V1 >= 0.11, ``Worker.init_device`` snapshots after NCCL and the cuBLAS handles): only what grows
  during loading and the profile run.

CUDA graphs: V1 subtracts ``profile_cudagraph_memory()`` when ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is on
(default from 0.20, ``rules.cudagraph_estimate_default``) and the V1 model runner estimates them; earlier, and with
Model Runner V2 before 0.29 (``runner_v2.py``), graphs are captured after the KV cache and lie outside the budget.
From 0.27.0 (read in the 0.27.0, 0.27.1 and 0.33.0 wheels; 0.26.0 prints the torch peak alone) the "peak activation"
of the ``--kv-cache-memory`` suggestion line includes that estimate (``gpu_worker.py::determine_available_memory``:
``peak_activation_memory = transient_peak_headroom + cudagraph_memory_estimate_applied``,
https://github.com/vllm-project/vllm/blob/v0.27.0/vllm/v1/worker/gpu_worker.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines import spreads
from kvplan.engines.versions import Version
from kvplan.engines.vllm import calibration as cal
from kvplan.engines.vllm import runner_v2
from kvplan.engines.vllm.args import VLLMArgs
from kvplan.engines.vllm.profile import Batch, activation_peak
from kvplan.engines.vllm.terms import Budget, BudgetTerm
from kvplan.hardware.cluster import Cluster
from kvplan.hardware.links import link_class
from kvplan.models.spec import ModelSpec
from kvplan.models.weights_band import MODEL_RESIDUAL_FRACTION
from kvplan.units import GiB


@dataclass(frozen=True)
class ProfileInputs:
    """What the profile run depends on besides the model and the flags (resolved by the engine)."""

    version: str
    kind: str  # "v0" | "v1"
    budget_semantics: str  # rules.VLLMRules.budget_semantics
    batch: Batch
    platform: str  # "cuda" | "rocm"
    act_bytes: int  # the model dtype's bytes (activations)
    weights_low_bytes: int | None = None  # the weights' own range when estimated (None: exact)
    weights_high_bytes: int | None = None
    eplb_state_bytes: int = 0  # EplbState.build's GPU tensors (eplb.py)
    eplb_buffer_bytes: int = 0  # one MoE layer's local experts, allocated by the profile's dummy rearrangement


def regime(p: ProfileInputs) -> str:
    v = Version(p.version)
    if (p.kind == "v0" and Version("0.6.4") <= v < Version("0.6.5")) or (
            p.kind == "v1" and p.budget_semantics == "v1-whole-gpu"):
        return "whole-device"
    if p.kind == "v0" or v < Version("0.11.0"):
        return "snapshot"
    return "after-init"


def non_torch(p: ProfileInputs, tp_world: int, link: str = "unknown") -> tuple[tuple[int, int, int], str]:
    """(value, low, high) bytes and the source, per regime, platform, TP size and link class
    (``hardware.links.link_class``)."""
    reg = regime(p)
    if reg == "after-init":
        c = cal.NON_TORCH_AFTER_INIT
        return c.bytes(), f"{c.what} ({c.source})"
    if p.platform == "rocm":
        c = cal.NON_TORCH_ROCM_TP1 if tp_world == 1 else cal.NON_TORCH_ROCM_TP_N
        return c.bytes(), f"{c.what} ({c.source})"
    if tp_world == 1:
        snap = cal.NON_TORCH_SNAPSHOT_TP1
    else:
        snap = cal.NON_TORCH_SNAPSHOT_NVSWITCH_TP_N if link == "nvswitch" else cal.NON_TORCH_SNAPSHOT_TP_N
    if reg == "snapshot":
        return snap.bytes(), f"{snap.what} ({snap.source})"
    ctx = cal.NON_TORCH_WHOLE_DEVICE_TP1
    if tp_world == 1:
        return ctx.bytes(), f"{ctx.what} ({ctx.source})"
    a, b = ctx.bytes(), snap.bytes()  # the CUDA context plus what TP > 1 adds (NCCL, custom all-reduce)
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2]), f"CUDA context ({ctx.source}) + TP > 1 buffers ({snap.source})"


def graphs_applied(p: ProfileInputs, args: VLLMArgs, cudagraph_default: bool, model: ModelSpec) -> bool:
    if p.kind != "v1" or args.enforce_eager or runner_v2.skips_cudagraph_estimate(p.version, model, args):
        return False
    env = args.env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
    if env is None or Version(p.version) < Version("0.18.0"):  # the variable exists from 0.18.0 (PR #30515)
        return cudagraph_default
    return env.strip() not in ("0", "", "false", "False")


def _rss(parts: list[int]) -> int:
    return int(math.sqrt(sum(float(max(0, x)) ** 2 for x in parts)))


def observed(term: BudgetTerm, version: str) -> BudgetTerm:
    """The term with its range set to value ± its spread on real logs (``engines.spreads``: a high quantile of
    the component's errors over the corpus logs that print it, in this version range) when there are enough logs;
    else as the calibration's hand-read range has it."""
    s = spreads.spread("vllm", term.name, version)
    if s is None or not term.estimated:
        return term
    d = s.bytes_of(term.bytes)
    return BudgetTerm(term.name, term.bytes, max(0, term.bytes - d), term.bytes + d,
                      f"{term.source}; range ± {d / GiB:.2f} GiB: the {spreads.QUANTILE:.0%} quantile of the error on "
                      f"{s.n} logs (engines/spreads.json)")


def profiled_budget(model: ModelSpec, args: VLLMArgs, cluster: Cluster, gmu: float, cudagraph_default: bool,
                    weights_bytes: int, p: ProfileInputs) -> Budget:
    reserve = cal.torch_reserve(cluster.gpu_name, p.platform)
    r = reserve.bytes()
    total = cluster.gpu_mem_bytes
    requested = math.ceil((total - r[0]) * gmu)
    req_lo, req_hi = math.ceil((total - r[2]) * gmu), math.ceil((total - r[1]) * gmu)
    terms = [BudgetTerm("torch-total-reserve", int(r[0] * gmu),
                        int(r[1] * gmu), int(r[2] * gmu),
                        f"x {gmu:g}: {reserve.what} ({reserve.source})")]
    w_lo = weights_bytes if p.weights_low_bytes is None else p.weights_low_bytes
    w_hi = weights_bytes if p.weights_high_bytes is None else p.weights_high_bytes
    terms.append(BudgetTerm("weights", weights_bytes, w_lo, w_hi, "weights per rank (input)"))
    act = activation_peak(model, p.batch, args.tensor_parallel_size, p.kind, p.version, p.act_bytes)
    terms.append(observed(BudgetTerm("activation-peak", act.bytes, act.low_bytes, act.high_bytes,
                                     f"{act.detail}; batch from {p.batch.source}"), p.version))
    nt, nt_src = non_torch(p, args.world_size, link_class(cluster.gpu_name)[1])
    terms.append(observed(BudgetTerm("non-torch", *nt, f"{regime(p)} accounting: {nt_src}"), p.version))
    graphs = 0
    if graphs_applied(p, args, cudagraph_default, model):
        g = cal.CUDAGRAPH_ESTIMATE.bytes()
        graphs = g[0]
        terms.append(BudgetTerm("cudagraph-estimate", *g, f"{cal.CUDAGRAPH_ESTIMATE.what} "
                                f"({cal.CUDAGRAPH_ESTIMATE.source})"))
    if p.eplb_state_bytes:
        terms.append(BudgetTerm("eplb-state", p.eplb_state_bytes, p.eplb_state_bytes, p.eplb_state_bytes,
                                "distributed/eplb/eplb_state.py EplbState.build (0.11.0): maps and load window"))
    if p.eplb_buffer_bytes:  # after the forward: it adds what it exceeds the activations by (0 up to all of it)
        over = max(0, p.eplb_buffer_bytes - act.bytes)
        terms.append(BudgetTerm("eplb-rearrange-buffer", over, 0, p.eplb_buffer_bytes,
                                "rebalance_execute.py rearrange_expert_weights_inplace: one MoE layer's local "
                                "experts, allocated by the profile run's dummy rearrangement after the forward"))
    if model.is_multimodal:
        terms.append(BudgetTerm("encoder-profile", *cal.ENCODER_PROFILE.bytes(), cal.ENCODER_PROFILE.what))
    costs = terms[1:]
    available = requested - sum(t.bytes for t in costs)
    # the band: the terms' errors are independent (different code paths and logs), so their spreads add in
    # quadrature rather than all at their worst end at once
    resid = int(spreads.residual_fraction("vllm", MODEL_RESIDUAL_FRACTION) * max(0, available))
    low = available - _rss([requested - req_lo, resid] + [t.high_bytes - t.bytes for t in costs])
    high = available + _rss([req_hi - requested, resid] + [t.bytes - t.low_bytes for t in costs])
    non_kv = weights_bytes + act.bytes + nt[0]
    notes = [f"GPU total as torch sees it ≈ nvidia-smi total − {r[0] / GiB:.2f} GiB (range {r[1] / GiB:.2f}-"
             f"{r[2] / GiB:.2f})"]
    for t in costs:
        if t.estimated:
            notes.append(f"{t.name} ≈ {t.bytes / GiB:.2f} GiB, estimated (range {t.low_bytes / GiB:.2f}-"
                         f"{t.high_bytes / GiB:.2f} GiB): {t.source}")
    if not graphs and p.kind == "v1" and not args.enforce_eager:
        notes.append("CUDA graphs are captured after the KV cache (outside the budget): Model Runner V2 estimates "
                     "no graph memory before 0.29" if runner_v2.skips_cudagraph_estimate(p.version, model, args)
                     else "CUDA graphs are captured after the KV cache in this version (outside the budget)")
    notes.append(f"KV budget range {max(0, low) / GiB:.2f}-{max(0, high) / GiB:.2f} GiB per rank; a startup log's "
                 "'Available KV cache memory' replaces every estimate, --kv-cache-memory-bytes pins it")
    return Budget(available, f"ceil(total × {gmu:g}) − weights − activation − non-torch"
                  + (" − CUDA-graph estimate" if graphs else "") + " (estimated)", False,
                  requested_bytes=requested, non_kv_bytes=non_kv, cudagraph_bytes=graphs,
                  weights_bytes=weights_bytes, notes=tuple(notes), terms=tuple(terms),
                  available_low_bytes=low, available_high_bytes=high)
