"""vLLM EPLB and redundant experts of one worker, read from the 0.11.0 wheel
(https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/...):

- ``config/parallel.py``: ``EPLBConfig`` (``--eplb-config`` JSON: ``window_size`` 1000, ``step_interval`` 3000,
  ``num_redundant_experts`` 0; the deprecated ``--num-redundant-experts`` / ``--eplb-window-size`` still set it);
  ``ParallelConfig.__post_init__`` refuses redundant experts without ``--enable-eplb``, EPLB without
  ``--enable-expert-parallel`` and EPLB at TP × DP = 1.
- ``model_executor/layers/fused_moe/layer.py::FusedMoE.__init__``: ``global_num_experts = E + R``;
  ``determine_expert_map`` gives each of the EP = TP × DP ranks (E + R) / EP experts (EPLB asserts an even split).
- ``distributed/eplb/eplb_state.py::EplbState.build`` (after the weights are loaded, before the profile run, on the
  GPU): ``physical_to_logical_map`` int64 [L, P], ``logical_to_physical_map`` int64 [L, E, 1024]
  (``MAX_EXPERT_REDUNDANCY + 1`` slots), ``logical_replica_count`` int64 [L, E], ``expert_load_pass`` int32 [L, P],
  ``expert_load_window`` int32 [window, L, P]; L = MoE layers, P = E + R.
- ``distributed/eplb/rebalance_execute.py::rearrange_expert_weights_inplace``: the profile run
  (``gpu_model_runner.py::_dummy_run`` → ``eplb_step(is_profile=True)``) allocates one MoE layer's local expert
  weights (``torch.empty_like`` of each) after the forward pass: it raises the profiled peak only by what it
  exceeds the forward's activations by (0 up to the whole buffer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec
from kvplan.result import RankTerm

URL = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/"
MAX_SLOTS = 1024  # MAX_EXPERT_REDUNDANCY + 1


@dataclass(frozen=True)
class EplbArgs:
    enabled: bool = False
    redundant: int = 0
    window_size: int = 1000


def parse_eplb(v: dict[str, Any]) -> EplbArgs:
    """``--enable-eplb``, ``--eplb-config`` (JSON) and the deprecated single flags, as ParallelConfig reads them."""
    from kvplan import validate

    cfg: dict[str, Any] = {}
    if v.get("eplb_config") is not None:
        raw = validate.json_value(str(v["eplb_config"]), "--eplb-config",
                                  hint="quote it: --eplb-config '{\"num_redundant_experts\": 32}'")
        if not isinstance(raw, dict):
            raise KvplanError("--eplb-config must be a JSON object", "e.g. '{\"num_redundant_experts\": 32}'")
        cfg = raw
    red = v.get("num_redundant_experts", cfg.get("num_redundant_experts", 0))
    window = v.get("eplb_window_size", cfg.get("window_size", 1000))
    hint = "fix it in the launch command"
    red = validate.count("num_redundant_experts", red, 0, validate.MAX_RANKS, hint)
    window = validate.count("eplb window_size", window, 1, validate.MAX_TOKENS, hint)
    return EplbArgs(bool(v.get("enable_eplb")), red, window)


def check(args) -> None:
    """The launches ``ParallelConfig.__post_init__`` refuses (one-line errors)."""
    e: EplbArgs = args.eplb
    if e.redundant and not e.enabled:
        raise KvplanError(f"num_redundant_experts is {e.redundant} but EPLB is not enabled (vLLM raises ValueError)",
                          "add --enable-eplb or drop the redundant experts")
    if e.enabled and not args.enable_expert_parallel:
        raise KvplanError("--enable-eplb needs --enable-expert-parallel (vLLM raises ValueError)",
                          "add --enable-expert-parallel")
    if e.enabled and args.tensor_parallel_size * args.data_parallel_size <= 1:
        raise KvplanError("--enable-eplb needs TP × DP > 1 (vLLM raises ValueError)", "raise -tp or -dp")


def physical(model: ModelSpec, args) -> tuple[int, int] | None:
    """(E + R, EP) of an EPLB launch of an MoE model, None otherwise; refuses an uneven split."""
    e: EplbArgs = args.eplb
    if not e.enabled or model.moe is None:
        return None
    ep = args.tensor_parallel_size * args.data_parallel_size
    p = model.moe.num_experts + e.redundant
    if p % ep:
        raise KvplanError(f"EPLB: {model.moe.num_experts} routed + {e.redundant} redundant experts do not split "
                          f"evenly over EP {ep} (FusedMoE asserts it)", f"pick num_redundant_experts so that the "
                          f"total is a multiple of {ep}")
    return p, ep


def state_bytes(model: ModelSpec, args) -> int:
    """``EplbState.build``'s GPU tensors of one worker (0 without EPLB)."""
    pe = physical(model, args)
    if pe is None or model.moe is None:
        return 0
    p, layers, e = pe[0], model.moe.moe_layers, model.moe.num_experts
    return int(layers * p * 8 + layers * e * MAX_SLOTS * 8 + layers * e * 8 + layers * p * 4
               + args.eplb.window_size * layers * p * 4)


@dataclass(frozen=True)
class EplbTerms:
    state_bytes: int = 0
    buffer_bytes: int = 0
    terms: tuple[RankTerm, ...] = ()


def eplb_terms(model: ModelSpec, args, gpu_name: str | None, version: str) -> EplbTerms:
    """EPLB's terms of one worker: redundant experts (in the weights), the state and the profile's buffer (in the
    KV budget's terms, profiled.py); refuses what vLLM refuses."""
    from kvplan.engines.vllm.weights import eplb_expert_bytes

    check(args)
    pe = physical(model, args)
    if pe is None or model.moe is None:
        return EplbTerms()
    state = state_bytes(model, args)
    red, layer = eplb_expert_bytes(model, args, gpu_name, version)
    e, (p, ep) = model.moe.num_experts, pe
    terms = (RankTerm("eplb-redundant-experts", f"{args.eplb.redundant} redundant experts over EP {ep}: {p // ep} "
                      f"experts per rank per MoE layer instead of {e // ep}", red, "gpu", "in weights_bytes",
                      URL + "model_executor/layers/fused_moe/layer.py FusedMoE.__init__ global_num_experts"),
             RankTerm("eplb-state", f"EPLB maps and a {args.eplb.window_size}-step load window over "
                      f"{model.moe.moe_layers} MoE layers × {p} physical experts", state, "gpu",
                      "in the KV budget (kv_budget_terms)", URL + "distributed/eplb/eplb_state.py EplbState.build"),
             RankTerm("eplb-rearrange-buffer", "one MoE layer's local experts, allocated by the profile run's dummy "
                      "rearrangement (counted beyond the activation peak only)", layer, "gpu",
                      "in the KV budget (kv_budget_terms, the part above the activations)",
                      URL + "distributed/eplb/rebalance_execute.py rearrange_expert_weights_inplace"))
    return EplbTerms(state, layer, terms)
