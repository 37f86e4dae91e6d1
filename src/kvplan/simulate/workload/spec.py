"""A workload: how requests arrive (open-loop rate, closed-loop clients, or both) and a stream of their lengths.

Requests are produced lazily (``Workload.stream()`` yields one ``Item`` at a time) so a job of any size costs the
memory of the requests in flight. ``arrival`` in an item is an absolute time (a trace) or None (the driver decides:
Poisson/gamma at ``rate``, or as soon as a client is free).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kvplan.errors import KvplanError


class Item(NamedTuple):
    prompt: int
    output: int
    max_new: int | None = None
    prefix_id: int | None = None
    prefix_len: int = 0
    arrival: float | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    stream_factory: Callable[[], Iterator[Item]] = field(repr=False, compare=False)
    total: int | None  # requests in the job (None: as many as the stream yields)
    concurrency: int | None = None  # closed-loop clients (or a cap on requests in flight with a rate)
    rate: float | None = None  # requests/s for arrivals the stream does not time (None or inf: back to back)
    burstiness: float = 1.0  # gamma shape of inter-arrival times (1.0: Poisson), as vLLM's benchmark
    seed: int = 0
    description: dict[str, Any] = field(default_factory=dict, compare=False)
    measured: dict[str, Any] | None = field(default=None, compare=False)  # what a benchmark file measured

    def __post_init__(self) -> None:
        if self.total is not None and self.total < 1:
            raise KvplanError(f"the workload has no requests ({self.name})")
        if self.concurrency is not None and self.concurrency < 1:
            raise KvplanError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.rate is not None and not self.rate > 0:
            raise KvplanError(f"--rate must be > 0 requests/s, got {self.rate}")
        if not self.burstiness > 0:
            raise KvplanError(f"--burstiness must be > 0, got {self.burstiness}")
        if self.concurrency is None and self.rate is None and not self.timed:
            raise KvplanError(f"workload {self.name!r} says neither how fast requests come nor how many clients send "
                              "them", "give --concurrency N (closed loop) and/or --rate R (requests/s)")

    @property
    def timed(self) -> bool:
        return bool(self.description.get("timed"))

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None and (self.rate is None or self.rate == float("inf"))

    def stream(self) -> Iterator[Item]:
        return self.stream_factory()

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "requests": self.total, "concurrency": self.concurrency, "rate": self.rate,
                "burstiness": self.burstiness, "seed": self.seed, **self.description}
