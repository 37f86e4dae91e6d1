"""Whether ``diagnose --url`` reached a serving engine at all: a server that does not answer is an error (exit 2,
one line with the reason: connection refused, timeout, an HTTP status, not an engine), not an "unknown" diagnosis.

The reason comes from the notes ``metrics.scrape`` keeps for every failed request ("GET /metrics: HTTP 404",
"... ConnectionRefusedError (Connection refused)", "... no complete answer within 5 s").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.diagnose.metrics import ServerView

_REASONS = (("ConnectionRefused", "connection refused"), ("no complete answer", "timeout"),
            ("Name or service not known", "host not found"), ("nodename nor servname", "host not found"),
            ("NoRouteToHost", "no route to host"), ("Network is unreachable", "network unreachable"),
            ("ConnectionReset", "connection reset"), ("not an http(s) URL", "not an http(s) URL"))


def _reason(notes: list[str]) -> str:
    for note in notes:
        for key, why in _REASONS:
            if key in note:
                return why
    for note in notes:
        if "HTTP " in note:
            return note.split(": ", 1)[-1]
    return notes[0].split(": ", 1)[-1] if notes else "no answer"


def unreachable(view: ServerView) -> str | None:
    """One line when the URL gave nothing an engine gives (None: it answered as an engine)."""
    if view.engine is not None or view.server_info or view.models:
        return None
    if view.n_scrapes:
        from kvplan.engines import all_engines

        names = " or ".join(e.display_name for e in all_engines())
        return (f"{view.url}: answered, but not an engine kvplan reads ({names}: no engine metrics on /metrics, "
                "no info endpoint, no /v1/models)")
    timeout = "timeout" in _reason(view.errors)
    return f"{view.url}: {_reason(view.errors)}" + (" (the server did not answer in time)" if timeout else "")
