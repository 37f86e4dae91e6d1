"""flag-removed (error): a flag this engine version no longer has (or does not have yet): its argparse
rejects the whole command ("unrecognized arguments")."""

from __future__ import annotations

from kvplan.engines.base import FindingContext
from kvplan.engines.versions import Version
from kvplan.engines.vllm.rules import ADDED_FLAGS, REMOVED_FLAGS
from kvplan.engines.vllm.settings import vllm_settings
from kvplan.result import Finding

ID = "flag-removed"


def check(ctx: FindingContext) -> list[Finding]:
    p = ctx.plan
    v, out = Version(p.engine_version), []
    for flag in vllm_settings(p).flags_given:
        if flag in REMOVED_FLAGS and v >= Version(REMOVED_FLAGS[flag][0]):
            since, instead = REMOVED_FLAGS[flag]
            out.append(Finding(ID, "error", f"vLLM {p.engine_version} has no {flag} (removed in {since}); the server "
                               "will not start", f"drop {flag}; {instead}", {flag: None}))
        elif flag in ADDED_FLAGS and v < Version(ADDED_FLAGS[flag]):
            out.append(Finding(ID, "error", f"vLLM {p.engine_version} does not know {flag} yet (added in "
                               f"{ADDED_FLAGS[flag]}); the server will not start",
                               f"upgrade vLLM to {ADDED_FLAGS[flag]} or later, or drop {flag}", {flag: None}))
    return out
