"""prefix-miss: shared prefixes are evicted before they are reused. Signals: the prefix-cache hit rate (vLLM
'Prefix cache hit rate' / prefix_cache_hits/queries; SGLang prefill '#cached-token' share) falls by >= 15 points
from the first to the last third of the window while the pool is >= 80 % used (so the cache evicts), and no
preemption (else the pool itself is the problem). Fix: keep prefixes longer: a host prefix tier (SGLang HiCache,
vLLM KV offloading / LMCache) or more device KV."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, pct, usage_range

ID = "prefix-miss"
DROP, BUSY = 0.15, 0.80


def check(ctx: RuleContext) -> Verdict | None:
    w = ctx.window
    if w.preemptions or w.retractions or w.prefix_hit_first is None or w.prefix_hit_last is None:
        return None
    if w.usage is None or w.usage < BUSY or w.prefix_hit_first - w.prefix_hit_last < DROP:
        return None
    ev = [f"prefix-cache hit rate falls from {pct(w.prefix_hit_first)} to {pct(w.prefix_hit_last)} over the "
          f"window ({w.scope})", f"{usage_range(w)}: the radix/prefix cache evicts to make room"]
    if w.prompt_tps is not None and w.gen_tps:
        ev.append(f"prompt tokens computed {w.prompt_tps:.0f} tok/s vs generated {w.gen_tps:.0f} tok/s")
    return Verdict(ID, "shared prefixes are evicted before reuse, so prompts are recomputed",
                   "a host prefix tier (SGLang --enable-hierarchical-cache; vLLM --kv-offloading-size) or more "
                   "device KV (levers)", tuple(ev))
