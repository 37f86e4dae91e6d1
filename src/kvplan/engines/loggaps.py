"""Launch settings a startup log may not show, named for ``kvplan explain`` (``Engine.explain_notes``).

A log whose argument dump (SGLang ServerArgs, vLLM "non-default args" / engine config line) is missing or cut
does not say how many ranks share the model: the plan then assumes one, and the per-rank figures are wrong by that
factor. What the log does show (rank labels on its lines) bounds it; the note names the setting, what was assumed,
and how to supply it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kvplan.logs.facts import LogFacts

_NUM = re.compile(r"\d+")


def ranks_seen(facts: LogFacts) -> int:
    """Distinct ranks the log's line prefixes name (TP0..TP3, rank=0..3, Worker_TP1_EP1): at least 1."""
    labels = [lb for lb in facts.ranks if lb]
    return max(1, len(labels))


def parallel_gap(facts: LogFacts, keys: Sequence[str], flags: str, command: Sequence[str] | None) -> str | None:
    """The note when neither the log's args nor the user's command give the parallel sizes ``keys``."""
    if command or any(k in facts.args for k in keys):
        return None  # the user's launch command is the launch: a flag it leaves out is the engine's default
    seen = ranks_seen(facts)
    shows = f"the log shows {seen} ranks" if seen > 1 else "the log names no rank"
    return (f"{' and '.join(keys)} (the log does not show them): planned as 1; {shows} — add the launch "
            f"command after -- ({flags})")
