"""SGLang scheduler settings a simulation needs, from the plan and the launch flags, per version.

Constants are the engine's own defaults, read in its source (pinned):
  * ``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7, ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14,
    ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600, ``SGLANG_RETRACT_DECODE_STEPS`` 20,
    ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` 4096:
    https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/environ.py (``global_config.py`` in 0.4.x,
    same values; also 0.5.23's environ.py).
  * ``Scheduler.__init__``: ``init_new_token_ratio = min(INIT × schedule_conservativeness, 1)``,
    ``min_new_token_ratio = min(init × FACTOR, 1)``, ``decay = (init - min) / DECAY_STEPS``:
    https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/managers/scheduler.py
  * ``ServerArgs``: ``max_prefill_tokens`` 16384, ``schedule_conservativeness`` 1.0, ``decode_log_interval`` 40,
    ``hicache_write_policy`` "write_through" (0.5.x; "write_through_selective" in 0.4.6):
    https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/server_args.py
  * retraction target: up to 0.5.1 ``retract_decode`` frees room for ``RETRACT_DECODE_STEPS`` more steps of every
    remaining request (``get_required_tokens``); from 0.5.2 only for the next step (``check_decode_mem``):
    https://github.com/sgl-project/sglang/blob/v0.5.1/python/sglang/srt/managers/schedule_batch.py vs
    https://github.com/sgl-project/sglang/blob/v0.5.2/python/sglang/srt/managers/schedule_batch.py
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.engines.versions import Version


@dataclass(frozen=True)
class SGLangKnobs:
    version: str
    page_size: int
    chunked_prefill_size: int | None  # None: chunked prefill disabled (-1)
    max_prefill_tokens: int
    max_running_requests: int  # per DP worker
    schedule_conservativeness: float = 1.0
    init_ratio_env: float = 0.7
    min_ratio_factor: float = 0.14
    decay_steps: int = 600
    retract_decode_steps: int = 20
    clip_max_new_tokens: int = 4096
    radix_cache: bool = True
    hicache_write_policy: str = "write_through"
    decode_log_interval: int = 40
    mixed_chunk: bool = False

    @property
    def init_new_token_ratio(self) -> float:
        return min(self.init_ratio_env * self.schedule_conservativeness, 1.0)

    @property
    def min_new_token_ratio(self) -> float:
        return min(self.init_new_token_ratio * self.min_ratio_factor, 1.0)

    @property
    def new_token_ratio_decay(self) -> float:
        return (self.init_new_token_ratio - self.min_new_token_ratio) / self.decay_steps

    @property
    def retract_to_next_step(self) -> bool:
        return Version(self.version) >= Version("0.5.2")


def _env_float(env: dict[str, str], key: str, default: float) -> float:
    try:
        return float(env.get(key, default))
    except ValueError:
        return default


def knobs(plan: Any, cmd: Any) -> SGLangKnobs:
    """The knobs of a planned SGLang launch (``cmd`` is the LaunchCommand the plan was made from)."""
    from kvplan.engines.cmdline import Flag, parse_flags
    from kvplan.engines.sglang.args import FLAGS
    from kvplan.engines.sglang.settings import sglang_settings

    v: dict[str, Any] = parse_flags(cmd.args, (*FLAGS, Flag("--schedule-conservativeness", "float"))).values
    s = sglang_settings(plan)
    chunk = s.chunked_prefill_size
    env = dict(cmd.env)
    old = Version(plan.engine_version) < Version("0.5.0")
    return SGLangKnobs(
        version=plan.engine_version, page_size=int(s.page_size or 1),
        chunked_prefill_size=int(chunk) if chunk and int(chunk) > 0 else None,
        max_prefill_tokens=int(v.get("max_prefill_tokens") or 16384),
        max_running_requests=max(1, int(plan.per_rank.max_running_requests or 1)),
        schedule_conservativeness=float(v.get("schedule_conservativeness") or 1.0),
        init_ratio_env=_env_float(env, "SGLANG_INIT_NEW_TOKEN_RATIO", 0.7),
        min_ratio_factor=_env_float(env, "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR", 0.14),
        decay_steps=int(_env_float(env, "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS", 600)),
        retract_decode_steps=int(_env_float(env, "SGLANG_RETRACT_DECODE_STEPS", 20)),
        clip_max_new_tokens=int(_env_float(env, "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", 4096)),
        radix_cache=not bool(v.get("disable_radix_cache")),
        hicache_write_policy=str(v.get("hicache_write_policy") or ("write_through_selective" if old
                                                                   else "write_through")),
        decode_log_interval=int(v.get("decode_log_interval") or 40),
        mixed_chunk=bool(v.get("enable_mixed_chunk")))
