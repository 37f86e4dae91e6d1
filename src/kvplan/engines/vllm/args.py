"""vLLM launch flags and environment that decide memory, parsed verbatim from ``vllm serve MODEL ...`` or
``python -m vllm.entrypoints.openai.api_server --model ...`` (names as in ``vllm/engine/arg_utils.py``;
underscores and unique prefixes are accepted like vLLM's argparse does)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kvplan.engines.cmdline import Flag, LaunchCommand, parse_flags
from kvplan.engines.vllm.eplb import EplbArgs, parse_eplb
from kvplan.errors import KvplanError

I, F, B, S = "int", "float", "bool", "str"
FLAGS: tuple[Flag, ...] = (
    Flag("--model", S), Flag("--tokenizer", S), Flag("--served-model-name", S), Flag("--revision", S),
    Flag("--tensor-parallel-size", I, ("-tp",)), Flag("--pipeline-parallel-size", I, ("-pp",)),
    Flag("--data-parallel-size", I, ("-dp",)), Flag("--decode-context-parallel-size", I, ("-dcp",)),
    Flag("--enable-expert-parallel", B, ("-ep",)),
    Flag("--gpu-memory-utilization", F), Flag("--kv-cache-memory-bytes", S, ("--kv-cache-memory",)),
    Flag("--block-size", I), Flag("--kv-cache-dtype", S), Flag("--max-model-len", S),
    Flag("--max-num-seqs", I), Flag("--max-num-batched-tokens", I), Flag("--dtype", S),
    Flag("--quantization", S, ("-q",)),
    Flag("--enforce-eager", B), Flag("--swap-space", F), Flag("--cpu-offload-gb", F),
    Flag("--kv-offloading-size", F), Flag("--kv-offloading-backend", S), Flag("--kv-transfer-config", S),
    Flag("--num-gpu-blocks-override", I), Flag("--enable-prefix-caching", B), Flag("--no-enable-prefix-caching", B),
    Flag("--device", S), Flag("--trust-remote-code", B), Flag("--host", S), Flag("--port", I),
    Flag("--enable-chunked-prefill", B), Flag("--disable-hybrid-kv-cache-manager", B),
    Flag("--limit-mm-per-prompt", S), Flag("--max-logprobs", I), Flag("--seed", I), Flag("--api-key", S),
    Flag("--disable-log-requests", B), Flag("--disable-log-stats", B), Flag("--uvicorn-log-level", S),
    Flag("--chat-template", S), Flag("--tool-call-parser", S), Flag("--enable-auto-tool-choice", B),
    Flag("--reasoning-parser", S), Flag("--load-format", S), Flag("--download-dir", S),
    Flag("--generation-config", S), Flag("--compilation-config", S, ("-O",)), Flag("--speculative-config", S),
    Flag("--distributed-executor-backend", S), Flag("--max-seq-len-to-capture", I), Flag("--hf-overrides", S),
    Flag("--mm-processor-kwargs", S), Flag("--mamba-cache-dtype", S), Flag("--mamba-ssm-cache-dtype", S),
    Flag("--mamba-cache-mode", S), Flag("--mamba-block-size", I), Flag("--override-generation-config", S),
    Flag("--async-scheduling", B),
    # LoRA (engines/vllm/lora.py)
    Flag("--enable-lora", B), Flag("--no-enable-lora", B), Flag("--max-loras", I), Flag("--max-lora-rank", I),
    Flag("--max-cpu-loras", I), Flag("--lora-modules", "list"), Flag("--lora-dtype", S),
    Flag("--fully-sharded-loras", B),
    # flags that send 0.8-0.10 back to the V0 engine (v1_oracle.py)
    Flag("--preemption-mode", S), Flag("--num-scheduler-steps", I), Flag("--scheduler-delay-factor", F),
    Flag("--disable-async-output-proc", B), Flag("--scheduling-policy", S), Flag("--enable-prompt-adapter", B),
) + (
    # EPLB (eplb.py)
    Flag("--enable-eplb", B), Flag("--eplb-config", S), Flag("--num-redundant-experts", I),
    Flag("--eplb-window-size", I),
)

_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str, flag: str = "--kv-cache-memory-bytes") -> int:
    """vllm/utils/argparse_utils.py::human_readable_int: k/m/g/t decimal, K/M/G/T binary, plain ints and
    scientific notation as Python's int(float()) would take them. Finite and under 2^60 (kvplan.validate)."""
    from kvplan import validate as val

    t = str(text).strip()
    hint = "use e.g. 8G (GiB), 8g (GB) or 8589934592" if "memory" in flag else "use e.g. 32768 or 32k"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT])", t)
    try:
        if m:
            value: float | int = float(m.group(1)) * _SUFFIX[m.group(2)]
        else:
            value = int(t) if t.lstrip("-").isdigit() else float(t)
    except ValueError:
        raise KvplanError(f"{flag} {text!r} is not a byte count", hint) from None
    if not -val.MAX_BYTES < value < val.MAX_BYTES:  # also NaN and inf
        raise KvplanError(f"{flag} {text!r} is not a finite count under 2^60", hint)
    return int(value)


@dataclass(frozen=True)
class VLLMArgs:
    model: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    dtype: str = "auto"
    quantization: str | None = None  # --quantization (online fp8 changes the weights held)
    enable_expert_parallel: bool = False  # experts split over DP×TP ranks (layers/fused_moe/config.py)
    enforce_eager: bool = False
    swap_space: float | None = None
    cpu_offload_gb: float = 0.0
    kv_offloading_size: float | None = None
    kv_offloading_backend: str | None = None
    kv_transfer_config: dict[str, Any] | None = None
    num_gpu_blocks_override: int | None = None
    device: str | None = None
    disable_hybrid_kv_cache_manager: bool = False
    enable_prefix_caching: bool = False
    no_enable_prefix_caching: bool = False
    speculative_config: str | None = None
    enable_lora: bool = False
    no_enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    lora_modules: tuple[str, ...] = ()
    lora_dtype: str | None = None
    fully_sharded_loras: bool = False
    # hybrid Mamba / gated-DeltaNet state (config/cache.py MambaDType, MambaCacheMode; engines/vllm/hybrid.py)
    mamba_cache_dtype: str | None = None
    mamba_ssm_cache_dtype: str | None = None
    mamba_cache_mode: str | None = None
    # V0-only scheduler settings: in 0.8-0.10 any non-default one makes the launch fall back to V0 (v1_oracle.py)
    preemption_mode: str | None = None
    num_scheduler_steps: int = 1
    scheduler_delay_factor: float = 0.0
    disable_async_output_proc: bool = False
    scheduling_policy: str = "fcfs"
    enable_prompt_adapter: bool = False
    eplb: EplbArgs = field(default_factory=EplbArgs)  # --enable-eplb, --eplb-config (eplb.py)
    env: dict[str, str] = field(default_factory=dict)
    flags_given: tuple[str, ...] = ()  # canonical flag names as written (for removed-flag checks)
    unknown_flags: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        """Workers (GPU ranks) of one engine: TP × PP. --data-parallel-size starts that many engines."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @cached_property  # asked a dozen times a plan; a frozen instance's answer never changes (replace() is new)
    def is_cpu(self) -> bool:
        """vLLM-CPU: selected by --device cpu, a VLLM_CPU_KVCACHE_SPACE prefix on the command, or
        ``VLLM_TARGET_DEVICE=cpu``, which picks the CPU platform at run time
        (``platforms/__init__.py::cpu_platform_plugin``: ``envs.VLLM_TARGET_DEVICE == "cpu"``:
        https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/platforms/__init__.py)."""
        return ((self.device or "").lower() == "cpu" or "VLLM_CPU_KVCACHE_SPACE" in self.env
                or self.env.get("VLLM_TARGET_DEVICE", "").lower() == "cpu")

    @property
    def connector(self) -> str | None:
        return (self.kv_transfer_config or {}).get("kv_connector")


def _check_numbers(v: dict[str, Any]) -> None:
    """Every numeric flag through kvplan.validate: finite, in vLLM's range, a sane magnitude."""
    from kvplan import validate as val

    hint = "fix it in the launch command"
    for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "decode_context_parallel_size"):
        if v.get(k) is not None:
            v[k] = val.count("--" + k.replace("_", "-"), v[k], 1, val.MAX_RANKS, hint)
    for k in ("block_size", "max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks_override",
              "max_seq_len_to_capture", "num_scheduler_steps", "max_loras", "max_lora_rank", "max_cpu_loras"):
        if v.get(k) is not None:
            v[k] = val.count("--" + k.replace("_", "-"), v[k], 1, val.MAX_TOKENS, hint)
    if v.get("gpu_memory_utilization") is not None:
        v["gpu_memory_utilization"] = val.fraction("--gpu-memory-utilization", v["gpu_memory_utilization"], hint)
    if "kv_cache_memory_bytes" in v:
        v["kv_cache_memory_bytes"] = human_readable_int(v["kv_cache_memory_bytes"])
        val.size_bytes("--kv-cache-memory-bytes", v["kv_cache_memory_bytes"], positive=True, hint=hint)
    mml = v.get("max_model_len")
    if mml is not None:
        v["max_model_len"] = None if str(mml) in ("auto", "-1") else human_readable_int(mml, "--max-model-len")
        if v["max_model_len"] is not None:
            val.count("--max-model-len", v["max_model_len"], 1, val.MAX_TOKENS, hint)
    if v.get("scheduler_delay_factor") is not None:
        v["scheduler_delay_factor"] = float(val.number("--scheduler-delay-factor", v["scheduler_delay_factor"],
                                                       lo=0.0, hi=1e6, hint=hint))
    for k in ("swap_space", "cpu_offload_gb", "kv_offloading_size"):
        if v.get(k) is not None:
            v[k] = val.gib("--" + k.replace("_", "-"), v[k], hint=hint)


def _check_env(env: dict[str, str]) -> None:
    """The memory-deciding environment values (the command's VAR=value prefix)."""
    from kvplan import validate as val

    if "VLLM_CPU_KVCACHE_SPACE" in env:
        s = env["VLLM_CPU_KVCACHE_SPACE"]
        if not s.isdigit():  # empty included: vllm/envs.py reads it with int(os.getenv(...)) and the engine stops
            raise KvplanError(f"VLLM_CPU_KVCACHE_SPACE={s!r}: vLLM-CPU reads it with int() and fails at start "
                              "(invalid literal for int()): a whole number of GiB",
                              "e.g. VLLM_CPU_KVCACHE_SPACE=4, or leave it out and give --kv-cache-memory-bytes")
        val.gib("VLLM_CPU_KVCACHE_SPACE", int(s), hint="e.g. VLLM_CPU_KVCACHE_SPACE=4")
    if "LMCACHE_MAX_LOCAL_CPU_SIZE" in env:
        val.gib("LMCACHE_MAX_LOCAL_CPU_SIZE", env["LMCACHE_MAX_LOCAL_CPU_SIZE"], hint="GiB per rank, e.g. 20")
    if env.get("LMCACHE_CHUNK_SIZE"):
        val.count("LMCACHE_CHUNK_SIZE", env["LMCACHE_CHUNK_SIZE"], 1, val.MAX_TOKENS, "e.g. 256")


_BY_KEY: dict[str, str] = {}  # flag key -> canonical name, filled on the first parse


def parse_vllm(cmd: LaunchCommand) -> VLLMArgs:
    p = parse_flags(cmd.args, FLAGS)
    v: dict[str, Any] = dict(p.values)
    if cmd.program[-1] == "serve" and p.positionals:
        v.setdefault("model", p.positionals[0])  # `vllm serve MODEL`
    v.setdefault("model", None)
    _check_numbers(v)
    if "kv_transfer_config" in v:
        from kvplan import validate

        ktc = validate.json_value(v["kv_transfer_config"], "--kv-transfer-config",
                                  hint="quote it: --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\"}'")
        if not isinstance(ktc, dict):
            raise KvplanError("--kv-transfer-config must be a JSON object")
        validate.optional_text("--kv-transfer-config kv_connector", ktc.get("kv_connector"), max_len=256)
        validate.mapping("--kv-transfer-config kv_connector_extra_config", ktc.get("kv_connector_extra_config"))
        v["kv_transfer_config"] = ktc
    env = {k: cmd.env[k] for k in cmd.env}
    _check_env(env)
    extra = (v.get("kv_transfer_config") or {}).get("kv_connector_extra_config")
    if isinstance(extra, dict):
        if "cpu_bytes_to_use" in extra:
            from kvplan import validate

            extra["cpu_bytes_to_use"] = validate.size_bytes(
                "--kv-transfer-config kv_connector_extra_config cpu_bytes_to_use", extra["cpu_bytes_to_use"])
        for key in ("lmcache.max_local_cpu_size", "max_local_cpu_size"):
            if key in extra:
                from kvplan import validate

                validate.gib(f"--kv-transfer-config kv_connector_extra_config {key}", extra[key])
    v["eplb"] = parse_eplb(v)
    fields = VLLMArgs.__dataclass_fields__
    kwargs = {k: val for k, val in v.items() if k in fields}
    if not _BY_KEY:
        _BY_KEY.update({f.key: f.name for f in FLAGS})
    given = tuple(_BY_KEY[k] for k in p.seen)
    return VLLMArgs(**kwargs, env=env, flags_given=given, unknown_flags=tuple(p.unknown))
