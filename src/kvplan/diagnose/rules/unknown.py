"""unknown: no rule matched; the reason says which signal was missing or how they conflict."""

from __future__ import annotations

from kvplan.diagnose.rules import RuleContext, Verdict, usage_range

ID = "unknown"


def check(ctx: RuleContext) -> Verdict:
    w = ctx.window
    if not w.samples and not w.prefills:
        why = ("no serving stats in the window: no SGLang 'Decode batch' / vLLM stats line, no usable /metrics "
               "(SGLang needs --enable-metrics)")
    elif w.running is None and w.queued is None:
        what = ", ".join(f"{k} {v:.1f} tok/s" for k, v in (("prompt", w.prompt_tps), ("generation", w.gen_tps))
                         if v is not None)
        why = f"only throughput figures ({what or 'none'}): no running/queued request counts or KV usage"
    else:
        why = (f"signals do not point one way: {w.running or 0:.1f} running, {w.queued or 0:.1f} waiting, "
               f"{usage_range(w)}")
    return Verdict(ID, why, "give a longer window, the full log, or a --url with metrics", (why + f" ({w.scope})",))
