"""flag-removed (error): a flag this engine version no longer has (or does not have yet): its argparse rejects
the whole command ("unrecognized arguments").

Signals: the flag is in the version table of other releases of the engine but not in this one
(engines/<engine>/flags.json, one table for SGLang and vLLM generated from the released wheels). Cause: the
launch line was written for another release (``--use-v2-block-manager`` after vLLM 0.9, ``--swap-space`` from
0.18.0, ``--max-num-partial-prefills`` from 0.27.0). Fix: drop it (the finding names the release it went away in
and, when the code or its deprecation message says so, its replacement), or pick a matching engine version.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "flag-removed"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines.flagtable import fix_flags, problems_for

    p = ctx.plan
    out = []
    for prob in problems_for(p.engine, p.engine_version, p.command):
        if prob.kind == "removed":
            instead = f"; its replacement is {prob.did_you_mean}" if prob.did_you_mean else ""
            out.append(Finding(ID, "error", prob.message, f"drop {prob.flag}{instead}", fix_flags(prob)))
        elif prob.kind == "unknown" and "yet (added in" in prob.message:
            added = prob.message.split("added in ", 1)[1].split(")")[0]
            out.append(Finding(ID, "error", prob.message,
                               f"upgrade {p.engine} to {added} or later, or drop {prob.flag}", fix_flags(prob)))
    return out
