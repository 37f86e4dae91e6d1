"""flag-bad-value (error): a flag's value that the engine version's argparse refuses.

Signals: a value outside the flag's ``choices`` (``--kv-cache-dtype fp9``), not parseable as its ``type``
(``--tp-size two``), a value given to a flag that takes none (``--enable-hierarchical-cache=true``), or a missing
value; checked against the version's flag table. Cause: argparse exits with ``invalid choice`` / ``invalid int
value`` / ``ignored explicit argument`` before the engine starts. Fix: the closest valid choice, or the flag
without a value.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "flag-bad-value"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines.flagtable import fix_flags, problems_for

    p = ctx.plan
    out = []
    for prob in problems_for(p.engine, p.engine_version, p.command):
        if prob.kind != "bad-value":
            continue
        if prob.value is not None and prob.did_you_mean and not prob.did_you_mean.startswith("-"):
            fix = f"{prob.flag} {prob.did_you_mean}"
        elif prob.fixed_tokens is not None:
            fix = f"{prob.flag} without a value"
        else:
            fix = f"give {prob.flag} a valid value"
        out.append(Finding(ID, "error", prob.message, fix, fix_flags(prob)))
    return out
