"""vLLM V1 scheduler settings a simulation needs, from the plan and the launch flags, per version.

Read in the engine's source (pinned):
  * ``SchedulerConfig``: ``max_num_batched_tokens`` / ``max_num_seqs`` (the plan resolves ``get_batch_defaults``),
    ``enable_chunked_prefill`` True, ``long_prefill_token_threshold`` 0, ``watermark`` 0.0,
    ``scheduler_reserve_full_isl`` True (present in 0.20.0 and 0.32.0, absent in 0.10.2; added by
    https://github.com/vllm-project/vllm/pull/37307): https://github.com/vllm-project/vllm/blob/v0.20.0/vllm/config/scheduler.py
  * ``CacheConfig.enable_prefix_caching``: on by default in V1 (``--no-enable-prefix-caching`` turns it off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.engines.versions import Version

FULL_ISL_SINCE = "0.20.0"  # first release read with the full-sequence admission gate


@dataclass(frozen=True)
class VLLMKnobs:
    version: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool = True
    prefix_caching: bool = True
    watermark: float = 0.0

    @property
    def full_sequence_gate(self) -> bool:
        """Admission checks the whole sequence fits (``full_sequence_must_fit``), not only the first chunk."""
        return Version(self.version) >= Version(FULL_ISL_SINCE)


def knobs(plan: Any, cmd: Any) -> VLLMKnobs:
    from kvplan.engines.vllm.args import parse_vllm
    from kvplan.engines.vllm.settings import vllm_settings

    a = parse_vllm(cmd)
    s = vllm_settings(plan)
    prefix_caching = not a.flags_given or "--no-enable-prefix-caching" not in a.flags_given
    chunked = True
    if "--enable-chunked-prefill" in a.flags_given and getattr(a, "enable_chunked_prefill", True) is False:
        chunked = False
    return VLLMKnobs(version=plan.engine_version, block_size=int(s.block_size or 16),
                     max_num_seqs=int(s.max_num_seqs or plan.per_rank.max_running_requests or 256),
                     max_num_batched_tokens=int(s.max_num_batched_tokens or 2048),
                     chunked_prefill=chunked, prefix_caching=prefix_caching)
