"""vLLM launch flags and environment that decide memory, parsed verbatim from ``vllm serve MODEL ...`` or
``python -m vllm.entrypoints.openai.api_server --model ...`` (names as in ``vllm/engine/arg_utils.py``;
underscores and unique prefixes are accepted like vLLM's argparse does)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.engines.cmdline import Flag, LaunchCommand, parse_flags
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
    Flag("--mm-processor-kwargs", S), Flag("--override-generation-config", S), Flag("--async-scheduling", B),
)

# Environment variables that change memory (read from the command's VAR=value prefix).
ENV_KEYS = ("VLLM_CPU_KVCACHE_SPACE", "CUDA_VISIBLE_DEVICES", "VLLM_USE_V1", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
            "LMCACHE_MAX_LOCAL_CPU_SIZE", "LMCACHE_CHUNK_SIZE", "LMCACHE_LOCAL_CPU", "LMCACHE_CONFIG_FILE",
            "LMCACHE_MAX_LOCAL_DISK_SIZE", "LMCACHE_USE_LAYERWISE", "LMCACHE_SAVE_ONLY_FIRST_RANK")

_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str, flag: str = "--kv-cache-memory-bytes") -> int:
    """vllm/utils/argparse_utils.py::human_readable_int: k/m/g/t decimal, K/M/G/T binary, plain ints and
    scientific notation as Python's int(float()) would take them."""
    t = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT])", t)
    if m:
        return int(float(m.group(1)) * _SUFFIX[m.group(2)])
    try:
        return int(t) if t.lstrip("-").isdigit() else int(float(t))
    except ValueError:
        raise KvplanError(f"{flag} {text!r} is not a byte count", "use e.g. 8G (GiB), 8g (GB) or 8589934592") from None


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
    env: dict[str, str] = field(default_factory=dict)
    flags_given: tuple[str, ...] = ()  # canonical flag names as written (for removed-flag checks)
    unknown_flags: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        """Workers (GPU ranks) of one engine: TP × PP. --data-parallel-size starts that many engines."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def is_cpu(self) -> bool:
        """vLLM-CPU: selected by --device cpu or by a VLLM_CPU_KVCACHE_SPACE prefix on the command."""
        return (self.device or "").lower() == "cpu" or "VLLM_CPU_KVCACHE_SPACE" in self.env

    @property
    def connector(self) -> str | None:
        return (self.kv_transfer_config or {}).get("kv_connector")


def _positive_int(name: str, v: Any) -> None:
    if v is not None and (not isinstance(v, int) or v < 1):
        raise KvplanError(f"{name} must be a positive integer, got {v}", "fix it in the launch command")


def parse_vllm(cmd: LaunchCommand) -> VLLMArgs:
    p = parse_flags(cmd.args, FLAGS)
    v: dict[str, Any] = dict(p.values)
    if cmd.program[-1] == "serve" and p.positionals:
        v.setdefault("model", p.positionals[0])  # `vllm serve MODEL`
    v.setdefault("model", None)
    for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "block_size", "max_num_seqs",
              "max_num_batched_tokens", "num_gpu_blocks_override"):
        _positive_int("--" + k.replace("_", "-"), v.get(k))
    gmu = v.get("gpu_memory_utilization")
    if gmu is not None and not 0 < gmu <= 1:
        raise KvplanError(f"--gpu-memory-utilization {gmu} is out of range (0, 1]", "fix it in the launch command")
    if "kv_cache_memory_bytes" in v:
        v["kv_cache_memory_bytes"] = human_readable_int(v["kv_cache_memory_bytes"])
        if v["kv_cache_memory_bytes"] <= 0:
            raise KvplanError("--kv-cache-memory-bytes must be positive")
    mml = v.get("max_model_len")
    if mml is not None:
        v["max_model_len"] = None if str(mml) in ("auto", "-1") else human_readable_int(mml, "--max-model-len")
        if v["max_model_len"] is not None and v["max_model_len"] < 1:
            raise KvplanError(f"--max-model-len {mml} must be positive")
    for k in ("swap_space", "cpu_offload_gb", "kv_offloading_size"):
        if v.get(k) is not None and v[k] < 0:
            raise KvplanError(f"--{k.replace('_', '-')} must be >= 0, got {v[k]}")
    if "kv_transfer_config" in v:
        try:
            ktc = json.loads(v["kv_transfer_config"])
        except json.JSONDecodeError as e:
            raise KvplanError(f"--kv-transfer-config is not valid JSON ({e.msg} at column {e.colno})",
                              "quote it: --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\"}'") from None
        if not isinstance(ktc, dict):
            raise KvplanError("--kv-transfer-config must be a JSON object")
        v["kv_transfer_config"] = ktc
    env = {k: cmd.env[k] for k in cmd.env}
    if "VLLM_CPU_KVCACHE_SPACE" in env:
        s = env["VLLM_CPU_KVCACHE_SPACE"]
        if s and not s.isdigit():
            raise KvplanError(f"VLLM_CPU_KVCACHE_SPACE={s!r}: vLLM-CPU takes a whole number of GiB",
                              "e.g. VLLM_CPU_KVCACHE_SPACE=4")
    fields = VLLMArgs.__dataclass_fields__
    kwargs = {k: val for k, val in v.items() if k in fields}
    by_key = {f.key: f.name for f in FLAGS}
    given = tuple(by_key[k] for k in p.seen)
    return VLLMArgs(**kwargs, env=env, flags_given=given, unknown_flags=tuple(p.unknown))
