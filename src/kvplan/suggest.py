"""The suggested command: the fixes of the error and warning findings applied to the launch, then checked like any
launch (``check`` without a suggestion of its own) until it has no error finding.

Round 1 applies every error/warning finding's flags (the first finding to name a flag wins: errors come first);
a round whose command still has error findings applies those findings' own flags over it (a fix that exposes
another problem, e.g. a host pool shrunk below the GPU pool on a version that asserts host > device, whose fix then
drops HiCache) and checks again, at most ``MAX_ROUNDS`` times. A fix that
never passes is not shown: ``suggested_command`` is None and ``note`` says why (README: "fixes are re-planned to
verify").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvplan.result import Finding, Plan

MAX_ROUNDS = 3


@dataclass(frozen=True)
class Suggestion:
    command: str | None  # None: no finding had a fix, or no fix passed its own check
    plan: Plan | None  # the suggested command's plan
    findings: tuple[Finding, ...] = ()  # what checking the suggested command found
    note: str | None = None  # why no command is shown although fixes were proposed


def fix_flags(findings: Sequence[Finding], into: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """The flags of the error and warning findings' fixes, errors first; a flag already set keeps its value, except
    that removing a flag wins over resizing it (a tier no size of which fits is dropped, not resized)."""
    out = dict(into or {})
    for f in sorted(findings, key=lambda f: f.severity != "error"):
        if f.severity in ("error", "warning"):
            for k, v in f.flags.items():
                if v is None:
                    out[k] = None
                else:
                    out.setdefault(k, v)
    return out


def suggest(findings: Sequence[Finding], rewrite: Callable[[dict[str, str | None]], str],
            recheck: Callable[[str], tuple[Plan, Sequence[Finding]]]) -> Suggestion:
    """The suggested command for ``findings``: ``rewrite(flags)`` builds a command from the original,
    ``recheck(command)`` plans and checks it (its findings)."""
    flags = fix_flags(findings)
    if not flags:
        return Suggestion(None, None)
    last: list[str] = []
    for _ in range(MAX_ROUNDS):
        command = rewrite(flags)
        try:
            plan, found = recheck(command)
        except Exception as e:  # noqa: BLE001 - an unplannable suggestion is not shown
            return Suggestion(None, None, (), f"the fixed command could not be planned ({e})")
        errors = [f for f in found if f.severity == "error"]
        if not errors:
            return Suggestion(command, plan, tuple(found))
        last = [f.id for f in errors]
        more = {**flags, **fix_flags(errors)}  # the fixed command's own errors decide: their fixes win
        if more == flags:
            break
        flags = more
    return Suggestion(None, None, (), "no fixed command passes its own check: it still has "
                      f"{', '.join(sorted(set(last)))}; fix those by hand (see each finding's fix)")
