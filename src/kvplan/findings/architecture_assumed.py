"""architecture-assumed (warning): the architecture is not in kvplan's list and was planned as standard attention
because its config.json has only the standard attention fields (models/standard_arch.py)."""

from __future__ import annotations

from kvplan.findings import Context
from kvplan.result import Finding

ID = "architecture-assumed"


def check(ctx: Context) -> list[Finding]:
    return [Finding(ID, "warning", n, "compare with the engine's startup log ('KV Cache is allocated' / 'GPU KV cache "
                    "size'), or pass --free-gib/--weights-gib from it")
            for n in ctx.plan.model.notes if n.startswith("architecture ")]
