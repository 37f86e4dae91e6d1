"""SGLang launch flags that decide memory, parsed verbatim from ``python -m sglang.launch_server ...``
or ``sglang serve ...`` (names and aliases as in ``srt/server_args.py::ServerArgs.add_cli_args``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.cmdline import Flag, LaunchCommand, parse_flags
from kvplan.errors import KvplanError

I, F, B, S = "int", "float", "bool", "str"
FLAGS: tuple[Flag, ...] = (
    Flag("--model-path", S, ("--model",)), Flag("--tokenizer-path", S), Flag("--served-model-name", S),
    Flag("--tp-size", I, ("--tp", "--tensor-parallel-size")), Flag("--dp-size", I, ("--dp", "--data-parallel-size")),
    Flag("--pp-size", I, ("--pp", "--pipeline-parallel-size")),
    Flag("--ep-size", I, ("--ep", "--expert-parallel-size")),
    Flag("--dcp-size", I), Flag("--enable-dp-attention", B), Flag("--nnodes", I), Flag("--node-rank", I),
    Flag("--mem-fraction-static", F), Flag("--max-total-tokens", I), Flag("--max-running-requests", I),
    Flag("--context-length", I), Flag("--chunked-prefill-size", I), Flag("--max-prefill-tokens", I),
    Flag("--cuda-graph-max-bs", I), Flag("--disable-cuda-graph", B), Flag("--kv-cache-dtype", S),
    Flag("--page-size", I), Flag("--quantization", S), Flag("--dtype", S), Flag("--attention-backend", S),
    Flag("--enable-hierarchical-cache", B, ("--enable-hicache",)), Flag("--hicache-ratio", F),
    Flag("--hicache-size", F), Flag("--hicache-write-policy", S), Flag("--hicache-io-backend", S),
    Flag("--hicache-mem-layout", S), Flag("--hicache-storage-backend", S),
    Flag("--hicache-host-memory-fraction", F), Flag("--hicache-host-memory-mode", S),
    Flag("--disable-radix-cache", B), Flag("--swa-full-tokens-ratio", F), Flag("--disable-hybrid-swa-memory", B),
    Flag("--mamba-full-memory-ratio", F), Flag("--max-mamba-cache-size", I),
    Flag("--speculative-algorithm", S), Flag("--speculative-draft-model-path", S, ("--speculative-draft-model",)),
    Flag("--speculative-num-draft-tokens", I), Flag("--speculative-num-steps", I), Flag("--speculative-eagle-topk", I),
    Flag("--enable-lora", B), Flag("--lora-paths", "list"), Flag("--max-loras-per-batch", I),
    Flag("--max-lora-rank", I), Flag("--lora-target-modules", "list"), Flag("--lora-backend", S),
    Flag("--max-loaded-loras", I),
    Flag("--trust-remote-code", B), Flag("--host", S), Flag("--port", I), Flag("--enable-metrics", B),
    Flag("--log-level", S), Flag("--load-format", S), Flag("--revision", S), Flag("--device", S),
    Flag("--weight-version", S), Flag("--reasoning-parser", S), Flag("--tool-call-parser", S),
    Flag("--disable-overlap-schedule", B), Flag("--random-seed", I), Flag("--api-key", S),
    Flag("--dist-init-addr", S), Flag("--decode-log-interval", I), Flag("--watchdog-timeout", F),
    Flag("--enable-torch-compile", B), Flag("--chat-template", S), Flag("--log-requests", B),
    Flag("--disaggregation-mode", S), Flag("--enable-mixed-chunk", B), Flag("--schedule-policy", S),
    Flag("--enable-ep-moe", B), Flag("--enable-deepep-moe", B), Flag("--moe-a2a-backend", S),
    Flag("--moe-dense-tp-size", I), Flag("--enable-dp-lm-head", B), Flag("--disable-shared-experts-fusion", B),
) + (
    # EPLB (eplb.py) and PD disaggregation (pd.py)
    Flag("--enable-eplb", B), Flag("--ep-num-redundant-experts", I), Flag("--eplb-rebalance-num-iterations", I),
    Flag("--expert-distribution-recorder-mode", S), Flag("--expert-distribution-recorder-buffer-size", I),
    Flag("--enable-expert-distribution-metrics", B), Flag("--eplb-algorithm", S), Flag("--init-expert-location", S),
    Flag("--ep-dispatch-algorithm", S), Flag("--disaggregation-transfer-backend", S),
    Flag("--disaggregation-bootstrap-port", I), Flag("--disaggregation-ib-device", S),
    Flag("--disaggregation-decode-tp", I), Flag("--disaggregation-decode-dp", I),
    Flag("--disaggregation-prefill-pp", I), Flag("--num-reserved-decode-tokens", I),
    Flag("--enable-piecewise-cuda-graph", B), Flag("--disaggregation-decode-enable-offload-kvcache", B),
    Flag("--hicache-storage-backend-extra-config", S),
)

# Flags that change memory in ways kvplan does not model; their presence is reported.
UNMODELED = {"speculative_algorithm": "speculative decoding (draft weights and draft KV)",
             "enable_lora": "LoRA buffers", "lora_paths": "LoRA buffers",
             "dcp_size": "decode context parallel", "hicache_storage_backend": "HiCache L3 storage buffers"}
SIZED_STORAGE_BACKENDS = ("mooncake",)  # HiCache L3 backends with host rows (engines/envtiers.py, ledger.py)


@dataclass(frozen=True)
class SGLangArgs:
    """What one SGLang launch asks for; defaults are those of ServerArgs (version-independent ones)."""

    model_path: str | None = None
    tp_size: int = 1
    dp_size: int = 1
    pp_size: int = 1
    ep_size: int = 1
    enable_dp_attention: bool = False
    nnodes: int = 1
    mem_fraction_static: float | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    kv_cache_dtype: str = "auto"
    page_size: int | None = None
    quantization: str | None = None
    dtype: str = "auto"
    # expert / DP-attention layout of the weights (engines/sglang/weights.py)
    enable_ep_moe: bool = False
    enable_deepep_moe: bool = False
    moe_a2a_backend: str | None = None
    moe_dense_tp_size: int | None = None
    enable_dp_lm_head: bool = False
    disable_shared_experts_fusion: bool = False
    attention_backend: str | None = None
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size: float = 0.0  # decimal GB per rank; 0 = use the ratio
    hicache_host_memory_fraction: float | None = None
    disable_radix_cache: bool = False
    swa_full_tokens_ratio: float = 0.8
    disable_hybrid_swa_memory: bool = False
    mamba_full_memory_ratio: float = 0.9
    max_mamba_cache_size: int | None = None
    speculative_algorithm: str | None = None
    # EPLB (eplb.py)
    enable_eplb: bool = False
    ep_num_redundant_experts: int = 0
    eplb_rebalance_num_iterations: int = 1000
    expert_distribution_recorder_mode: str | None = None
    expert_distribution_recorder_buffer_size: int | None = None
    enable_expert_distribution_metrics: bool = False
    # PD disaggregation (pd.py)
    disaggregation_mode: str = "null"
    disaggregation_transfer_backend: str = "mooncake"
    num_reserved_decode_tokens: int = 512
    enable_piecewise_cuda_graph: bool = False
    disaggregation_decode_enable_offload_kvcache: bool = False  # a HiCache host pool on the decode side (hicache.py)
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    # LoRA (engines/sglang/lora.py)
    enable_lora: bool = False
    lora_paths: tuple[str, ...] = ()
    max_loras_per_batch: int = 8
    max_lora_rank: int | None = None
    lora_target_modules: tuple[str, ...] = ()
    lora_backend: str | None = None
    unknown_flags: tuple[str, ...] = ()
    unmodeled: tuple[str, ...] = ()

    # ---- derived: scheduler processes ("ranks") and DP-attention groups ----
    @property
    def world_size(self) -> int:
        """GPU ranks of one launch: tp × pp (DP attention splits TP); plain --dp adds replicas."""
        base = self.tp_size * self.pp_size
        return base if self.enable_dp_attention else base * self.dp_size

    @property
    def attn_dp_size(self) -> int:
        return self.dp_size if self.enable_dp_attention else 1

    @property
    def attn_tp_size(self) -> int:
        """Ranks that share one attention group (``tp_size // dp_size`` with DP attention)."""
        return self.tp_size // self.attn_dp_size

    @property
    def replicas(self) -> int:
        """Independent router-level data-parallel replicas (plain --dp without DP attention)."""
        return 1 if self.enable_dp_attention else self.dp_size


def _check_numbers(v: dict) -> None:
    """Every numeric flag through kvplan.validate: finite, in the engine's range, a sane magnitude."""
    from kvplan import validate as val

    hint = "fix it in the launch command"

    def name(k: str) -> str:
        return "--" + k.replace("_", "-")

    if v.get("ep_num_redundant_experts") is not None:
        v["ep_num_redundant_experts"] = val.count("--ep-num-redundant-experts", v["ep_num_redundant_experts"], 0,
                                                  val.MAX_RANKS, hint)
    for k in ("eplb_rebalance_num_iterations", "num_reserved_decode_tokens"):
        if v.get(k) is not None:
            v[k] = val.count(name(k), v[k], 0, val.MAX_TOKENS, hint)
    if v.get("expert_distribution_recorder_buffer_size") is not None:  # < 0: an unbounded buffer
        v["expert_distribution_recorder_buffer_size"] = val.count(
            "--expert-distribution-recorder-buffer-size", v["expert_distribution_recorder_buffer_size"], -1,
            val.MAX_TOKENS, hint)
    for k in ("tp_size", "dp_size", "pp_size", "ep_size", "nnodes", "dcp_size"):
        if v.get(k) is not None:
            v[k] = val.count(name(k), v[k], 1, val.MAX_RANKS, hint)
    if v.get("node_rank") is not None:
        v["node_rank"] = val.count("--node-rank", v["node_rank"], 0, val.MAX_RANKS, hint)
    for k in ("mem_fraction_static", "swa_full_tokens_ratio", "mamba_full_memory_ratio",
              "hicache_host_memory_fraction"):
        if v.get(k) is not None:
            v[k] = val.fraction(name(k), v[k], hint)
    for k in ("max_total_tokens", "max_running_requests", "context_length", "page_size", "cuda_graph_max_bs",
              "max_mamba_cache_size", "max_prefill_tokens", "speculative_num_draft_tokens", "speculative_num_steps",
              "speculative_eagle_topk", "max_loras_per_batch", "max_lora_rank", "max_loaded_loras"):
        if v.get(k) is not None:
            v[k] = val.count(name(k), v[k], 1, val.MAX_TOKENS, hint)
    if v.get("chunked_prefill_size") is not None:  # -1 (or any value <= 0) disables chunked prefill
        v["chunked_prefill_size"] = val.count("--chunked-prefill-size", v["chunked_prefill_size"], -1,
                                              val.MAX_TOKENS, hint)
    if v.get("hicache_ratio") is not None:
        v["hicache_ratio"] = float(val.number("--hicache-ratio", v["hicache_ratio"], lo=0.0, hi=1e6, hint=hint))
    if v.get("hicache_size") is not None:
        v["hicache_size"] = val.gb("--hicache-size", v["hicache_size"], hint=hint)


def parse_sglang(cmd: LaunchCommand) -> SGLangArgs:
    """Resolve an SGLang command line into SGLangArgs (bad values raise KvplanError)."""
    p = parse_flags(cmd.args, FLAGS)
    v = p.values
    if p.positionals and "model_path" not in v:
        v["model_path"] = p.positionals[0]
    _check_numbers(v)
    tp, dp = int(v.get("tp_size", 1)), int(v.get("dp_size", 1))
    if v.get("enable_dp_attention") and tp % dp:
        raise KvplanError(f"--enable-dp-attention needs --tp-size ({tp}) divisible by --dp-size ({dp})")
    fields = SGLangArgs.__dataclass_fields__
    kwargs = {k: val for k, val in v.items() if k in fields}
    sized = str(v.get("hicache_storage_backend") or "").lower() in SIZED_STORAGE_BACKENDS
    unmodeled = tuple(sorted({UNMODELED[k] for k in v if k in UNMODELED
                              and not (k == "hicache_storage_backend" and sized)}))
    return SGLangArgs(**kwargs, unknown_flags=tuple(p.unknown), unmodeled=unmodeled)
