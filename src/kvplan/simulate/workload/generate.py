"""Generated workloads: ``--requests N --prompt-len P --output-len L`` with length distributions and a seed.

A distribution is written ``fixed``, ``uniform:S`` (uniform on [m(1-S), m(1+S)]), ``range:R`` (SGLang/vLLM bench
``random_range_ratio``: uniform integers on [m·R, m]), ``lognormal:S`` (log-sd S, mean m) or ``exp`` (mean m).
Lengths are at least 1. The same seed gives the same job.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

from kvplan.errors import KvplanError
from kvplan.simulate.workload.spec import Item, Workload

DISTS = ("fixed", "uniform", "range", "lognormal", "exp")


def sampler(spec: str, mean: int, rnd: random.Random) -> Callable[[], int]:
    """A function drawing one length from ``spec`` around ``mean`` tokens."""
    if mean < 1:
        raise KvplanError(f"lengths must be >= 1 token, got {mean}")
    name, _, arg = (spec or "fixed").partition(":")
    name = name.strip().lower()
    try:
        x = float(arg) if arg else None
    except ValueError:
        raise KvplanError(f"bad length distribution {spec!r}", "e.g. fixed, uniform:0.5, range:0.25, lognormal:0.8, "
                          "exp") from None
    if name == "fixed":
        return lambda: mean
    if name == "uniform":
        s = 0.5 if x is None else x
        if not 0 <= s <= 1:
            raise KvplanError(f"uniform spread must be in [0, 1], got {s}")
        lo, width, u = mean * (1 - s), 2 * mean * s, rnd.random
        return lambda: max(1, int(lo + width * u() + 0.5))
    if name == "range":
        r = 0.0 if x is None else x
        if not 0 <= r <= 1:
            raise KvplanError(f"range ratio must be in [0, 1], got {r}")
        lo = max(int(mean * r), 1)
        return lambda: rnd.randint(lo, mean)
    if name == "lognormal":
        s = 0.5 if x is None else x
        if s <= 0:
            raise KvplanError(f"lognormal sigma must be > 0, got {s}")
        mu = math.log(mean) - s * s / 2
        return lambda: max(1, int(round(rnd.lognormvariate(mu, s))))
    if name == "exp":
        return lambda: max(1, int(round(rnd.expovariate(1.0 / mean))))
    raise KvplanError(f"unknown length distribution {name!r}", "one of " + ", ".join(DISTS))


def generated(requests: int, prompt_len: int, output_len: int, concurrency: int | None = None,
              rate: float | None = None, burstiness: float = 1.0, prompt_dist: str = "fixed",
              output_dist: str = "fixed", max_new_tokens: int | None = None, shared_prefix: int = 0,
              prefix_groups: int = 1, seed: int = 0) -> Workload:
    if requests < 1:
        raise KvplanError(f"--requests must be >= 1, got {requests}")
    if shared_prefix < 0 or prefix_groups < 1:
        raise KvplanError("--shared-prefix must be >= 0 and --prefix-groups >= 1")
    # validate the specs now (bad input fails before the run)
    sampler(prompt_dist, prompt_len, random.Random(0))
    sampler(output_dist, output_len, random.Random(0))

    def stream() -> Iterator[Item]:
        rnd = random.Random(seed)
        p, o = sampler(prompt_dist, prompt_len, rnd), sampler(output_dist, output_len, rnd)
        for i in range(requests):
            prompt = p()
            pid = (i % prefix_groups) if shared_prefix else None
            if pid is not None:
                prompt += shared_prefix
            yield Item(prompt, o(), max_new_tokens, pid, shared_prefix if pid is not None else 0)

    desc = {"kind": "generated", "prompt_len": prompt_len, "output_len": output_len, "prompt_dist": prompt_dist,
            "output_dist": output_dist, "max_new_tokens": max_new_tokens, "shared_prefix": shared_prefix,
            "prefix_groups": prefix_groups if shared_prefix else None}
    return Workload(name=f"{requests} requests of {prompt_len}+{output_len} tokens", stream_factory=stream,
                    total=requests, concurrency=concurrency, rate=rate, burstiness=burstiness, seed=seed,
                    description=desc)
