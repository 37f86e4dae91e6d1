"""flag-unknown (error): the engine version's own argument parser rejects a flag of the launch command.

Signals: a flag that is no option string of that version and no unique prefix of one (argparse
``unrecognized arguments``), or a prefix that matches several options (``ambiguous option``), checked against the
version's flag table (engines/<engine>/flags.json, generated from the released wheel by
scripts/gen_flag_tables.py). Cause: a misspelling (``--mem-fraction-statc``), a flag of the other engine, or British
spelling (``--gpu-memory-utilisation``). Fix: the closest flag that version accepts, with the same value; the
suggested command is that replacement. kvplan still plans with the engine defaults, but the launch would not start.
"""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "flag-unknown"


def check(ctx: Context) -> list[Finding]:
    from kvplan.engines.flagtable import fix_flags, problems_for

    p = ctx.plan
    out = []
    for prob in problems_for(p.engine, p.engine_version, p.command):
        if prob.kind not in ("unknown", "ambiguous") or "yet (added in" in prob.message:
            continue
        if prob.did_you_mean:
            fix = f"use {prob.did_you_mean} (same value)"
        elif prob.kind == "ambiguous":
            fix = f"write {prob.flag} out in full"
        else:
            fix = f"drop {prob.flag}"
        out.append(Finding(ID, "error", prob.message, fix, fix_flags(prob)))
    return out
