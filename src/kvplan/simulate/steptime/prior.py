"""The roofline of a planned launch: per-rank weights and KV bytes from the plan, expert shares from the model.

    expert_fraction        = routed-expert parameters / all parameters (config.json arithmetic,
                             ``ModelSpec.param_breakdown``; the byte share is taken equal to the parameter share)
    params per rank        = weights_bytes per rank / (checkpoint bytes / parameters)
    active params / token  = params per rank × (1 - expert_fraction + expert_fraction × k / E)

The compute dtype is fp8 for fp8 checkpoints, bf16 otherwise (int4 weight-only kernels compute in bf16).
"""

from __future__ import annotations

from typing import Any

from kvplan.simulate.steptime.perf import device_perf
from kvplan.simulate.steptime.roofline import Roofline


def _model(inputs: Any):
    from kvplan.models.catalog import resolve_model

    try:
        return resolve_model(inputs.model_path, inputs.options.get("model_config"))
    except Exception:  # noqa: BLE001 - the plan was made, so this only fails for odd inputs: no MoE detail then
        return None


def roofline_for(inputs: Any, mem_bw_gbps: float | None = None, tflops: float | None = None) -> Roofline:
    m = _model(inputs)
    expert_frac, n_exp, k = 0.0, 0, 0
    bytes_per_param = 2.0
    fp8 = False
    if m is not None:
        b = m.param_breakdown()
        total = sum(b.values())
        if m.moe is not None and total:
            expert_frac = b["experts"] / total
            n_exp, k = m.moe.num_experts, m.moe.experts_per_tok
        if m.weight_bytes and m.param_count:
            bytes_per_param = m.weight_bytes / m.param_count
        else:
            bytes_per_param = float(m.dtype_bytes)
        fp8 = str(m.quant_method or "").lower() in ("fp8", "fbgemm_fp8")
    params_rank = inputs.weights_bytes / max(bytes_per_param, 1e-9)
    active = params_rank * (1 - expert_frac + (expert_frac * k / n_exp if n_exp else 0.0))
    perf = device_perf(inputs.gpu, fp8, mem_bw_gbps, tflops)
    return Roofline(weights_bytes=inputs.weights_bytes, expert_fraction=expert_frac, n_experts=n_exp,
                    experts_per_token=k, kv_bytes_per_token=inputs.kv_bytes_per_token,
                    active_params_per_token=active, lockstep_groups=inputs.dp_groups,
                    mem_bw_gbps=perf.mem_bw_gbps, dense_tflops=perf.dense_tflops, hardware_source=perf.source)
