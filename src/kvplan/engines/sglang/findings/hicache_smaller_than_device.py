"""hicache-smaller-than-device: the host pool holds fewer tokens than the GPU pool.

SGLang <= 0.5.14 asserts "The host memory should be larger than the device memory with the current protocol"
(error); later versions only warn that L2 effectiveness is reduced.
Signals: HiCache on, host tokens per rank <= device tokens per rank. Fix: a --hicache-size 10 % above the GPU pool.
"""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.sglang.settings import sglang_settings
from kvplan.result import Finding

ID = "hicache-smaller-than-device"


def check(ctx: FindingContext) -> list[Finding]:
    p, r = ctx.plan, ctx.plan.per_rank
    hc = sglang_settings(p).hicache
    if not hc.enabled or r.host_kv_tokens > r.kv_tokens:
        return []
    fatal = hc.host_must_exceed_device
    msg = (f"per rank: host pool {r.host_kv_tokens:,} tokens <= GPU pool {r.kv_tokens:,} tokens"
           + ("; this SGLang version asserts host > device and fails at startup" if fatal
              else "; SGLang warns that the host tier adds little"))
    need_gb = int(r.kv_tokens * r.kv_bytes_per_token * 1.1 / 1e9) + 1
    return [Finding(ID, "error" if fatal else "warning", msg,
                    f"--hicache-size of at least {need_gb} GB per rank (or drop --enable-hierarchical-cache)")]
