"""EPLB and redundant experts of one SGLang rank (read from the 0.5.9 wheel,
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/...):

- ``--ep-num-redundant-experts R`` adds R physical experts to every MoE layer: ``models/deepseek_v2.py::
  DeepseekV2MoE.__init__`` builds ``num_experts = n_routed_experts + num_fused_shared_experts + R`` and
  ``layers/moe/fused_moe_triton/layer.py::FusedMoE.__init__`` keeps ``(num_experts − fused) // moe_ep_size``
  (+ fused) of them on each rank; ``eplb/expert_location.py::ExpertLocationMetadata._init_common`` asserts
  ``(E + R) % ep_size == 0``. So each EP rank holds (E + R) / EP routed experts (the model classes that read the
  flag are listed in ``REDUNDANT_ARCHS``).
- The expert-distribution recorder (``--enable-eplb`` sets ``--expert-distribution-recorder-mode stat``,
  ``server_args.py::_handle_eplb_and_dispatch``; its buffer size defaults to ``--eplb-rebalance-num-iterations``
  (1000), ``_handle_expert_distribution_metrics``): ``eplb/expert_distribution.py::_StatAccumulator`` keeps a
  ``_CircularBuffer`` of (buffer_size, layers, E + R) int32 on the GPU, and ``_SelectExpertsSinglePassGatherer``
  one (layers, E + R) int32 count; layers = ``num_hidden_layers`` (``get_model_config_for_expert_location``).
  ``model_runner.py::ModelRunner.initialize`` builds it before ``load_model``, so it comes out of the memory the
  KV pool is sized from (like the weights, outside their "mem usage" figure).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.models.spec import ModelSpec
from kvplan.result import RankTerm

# models/*.py of 0.5.9 whose MoE block adds get_global_server_args().ep_num_redundant_experts (EntryClass names)
REDUNDANT_ARCHS = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM", "Glm4MoeForCausalLM", "GlmMoeDsaForCausalLM", "Glm4MoeLiteForCausalLM",
    "GptOssForCausalLM", "MiniMaxM2ForCausalLM", "BailingMoEForCausalLM", "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM", "ExaoneMoEForCausalLM", "MiMoV2FlashForCausalLM", "NemotronHForCausalLM",
    "SDARMoeForCausalLM", "Step3p5ForCausalLM", "LLaDA2MoeModelLM"})
SOURCE = "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/eplb/expert_location.py"
INT32 = 4


@dataclass(frozen=True)
class ExpertLayout:
    logical: int  # routed experts of the checkpoint (E)
    redundant: int  # --ep-num-redundant-experts (R), 0 when the model class does not read it
    ep_size: int
    note: str | None = None

    @property
    def physical(self) -> int:
        return self.logical + self.redundant

    @property
    def local(self) -> int:
        """Routed experts on one EP rank: (E + R) // EP (``FusedMoE.num_local_experts``)."""
        return self.physical // self.ep_size


def expert_layout(model: ModelSpec, redundant: int, ep_size: int) -> ExpertLayout | None:
    """The physical experts of an MoE model under ``--ep-num-redundant-experts`` (None for a dense model)."""
    if model.moe is None:
        return None
    e = model.moe.num_experts
    if redundant and model.architecture not in REDUNDANT_ARCHS:
        return ExpertLayout(e, 0, ep_size, f"--ep-num-redundant-experts {redundant}: SGLang's {model.architecture} "
                            "does not read it (no redundant experts built)")
    if redundant and (e + redundant) % ep_size:  # without redundancy the MoE layer's own check applies
        raise KvplanError(f"--ep-num-redundant-experts {redundant}: {e} routed + {redundant} redundant experts do not "
                          f"split over --ep-size {ep_size} (SGLang asserts (E + R) % ep_size == 0)",
                          f"pick R so that {e} + R is a multiple of {ep_size}")
    return ExpertLayout(e, redundant, ep_size)


def recorder_mode(args) -> str | None:
    """``--expert-distribution-recorder-mode`` as ServerArgs resolves it (stat under --enable-eplb or metrics)."""
    mode = getattr(args, "expert_distribution_recorder_mode", None)
    if mode is None and (getattr(args, "enable_eplb", False)
                         or getattr(args, "enable_expert_distribution_metrics", False)):
        return "stat"
    return mode


def recorder_bytes(model: ModelSpec, args, ep_size: int) -> tuple[int, str]:
    """GPU bytes per rank of the expert-distribution recorder, with how they were sized; (0, "") when it is off."""
    mode = recorder_mode(args)
    if mode is None:
        return 0, ""
    lay = expert_layout(model, int(getattr(args, "ep_num_redundant_experts", 0) or 0), ep_size)
    if lay is None:
        return 0, ""
    size = getattr(args, "expert_distribution_recorder_buffer_size", None)
    if size is None:
        size = getattr(args, "eplb_rebalance_num_iterations", None) or 1000
    layers = model.num_layers
    count = layers * lay.physical * INT32  # _SelectExpertsSinglePassGatherer._data
    if mode not in ("stat", "stat_approx"):
        return count, (f"expert-distribution recorder ({mode}): the gatherer's {layers} × {lay.physical} int32 "
                       "count; its per-pass detail buffers grow with traffic and are not sized")
    rows = 128 if size < 0 else size  # _InfiniteBuffer starts at 128 rows and doubles; _CircularBuffer: size
    return rows * count + count, (f"expert-distribution recorder ({mode}): {rows} × {layers} layers × "
                                  f"{lay.physical} physical experts × int32 + the gatherer's count")


def effective_ep(args) -> int:
    """The MoE expert-parallel size: --ep-size, or tp with --enable-ep-moe / DeepEP / an all-to-all backend."""
    a2a = str(getattr(args, "moe_a2a_backend", None) or "")
    if getattr(args, "enable_ep_moe", False) or getattr(args, "enable_deepep_moe", False) or a2a not in ("", "none"):
        return int(args.tp_size)
    return int(getattr(args, "ep_size", 1) or 1)


@dataclass(frozen=True)
class EplbGpu:
    reserved_bytes: int  # allocated before the KV profile (the recorder)
    terms: tuple[RankTerm, ...]
    notes: tuple[str, ...]


def eplb_gpu(model: ModelSpec, args, redundant_bytes: int) -> EplbGpu:
    """EPLB's terms of one rank: the redundant experts (``redundant_bytes``, inside the weights estimate:
    weights.py) and the recorder (before the pool)."""
    terms, notes = [], []
    ep = effective_ep(args)
    red = int(getattr(args, "ep_num_redundant_experts", 0) or 0)
    lay = expert_layout(model, red, ep) if red else None
    if lay is not None and lay.redundant:
        terms.append(RankTerm("eplb-redundant-experts", f"{lay.redundant} redundant experts over EP {ep}: "
                              f"{lay.local} experts per rank per MoE layer instead of {lay.logical // ep}",
                              redundant_bytes, "gpu", "in weights_bytes",
                              "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/layers/moe/"
                              "fused_moe_triton/layer.py FusedMoE.__init__ num_local_experts"))
    rec, how = recorder_bytes(model, args, ep)
    if rec:
        terms.append(RankTerm("eplb-expert-recorder", how, rec, "gpu", "before the KV pool (like the weights)",
                              SOURCE.replace("expert_location.py", "expert_distribution.py _StatAccumulator")))
        notes.append(f"EPLB {how}: {rec / 2**20:.1f} MiB per rank, built before the KV pool is sized")
    return EplbGpu(rec, tuple(terms), tuple(notes))
