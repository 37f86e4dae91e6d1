"""The window as a time series for pictures: one point per load sample (decode / stats / metrics line).

    series[] {i, t_s, source, running, queued, kv_usage, gen_tps}
i: the sample's index in the window; t_s: seconds since the window's first timestamp (None when the source has no
timestamps); source: the DP group / engine that printed it ("" when one); running, queued: requests as that source
counts them; kv_usage: its KV pool usage, 0-1; gen_tps: its generation throughput, tokens/s.
At most ``limit`` points, evenly spaced over the window (bounded JSON for hours of logs).
"""

from __future__ import annotations

from typing import Any

from kvplan.diagnose.window import Window

LIMIT = 2000


def window_series(w: Window, limit: int = LIMIT) -> list[dict[str, Any]]:
    samples = w.samples or w.prefills
    if len(samples) > limit:
        step = len(samples) / limit
        samples = [samples[int(k * step)] for k in range(limit)]
    times = [s.t for s in samples if s.t is not None]
    t0 = min(times) if times else None
    return [{"i": i, "t_s": None if s.t is None or t0 is None else round(s.t - t0, 3), "source": s.source,
             "running": s.running, "queued": s.queued, "kv_usage": s.usage, "gen_tps": s.gen_tps}
            for i, s in enumerate(samples)]
