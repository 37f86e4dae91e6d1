"""A workload from the command line's options: a file (``--workload``), or generated (``--requests`` ...).

The options themselves are declared by ``kvplan.cli.options.add_workload_options``; this module turns their values
(``WORKLOAD_FIELDS``) into a Workload."""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.simulate.workload.spec import Workload

WORKLOAD_FIELDS = ("workload", "requests", "prompt_len", "output_len", "prompt_dist", "output_dist", "max_new_tokens",
                   "shared_prefix", "prefix_groups", "concurrency", "rate", "burstiness", "seed")


DEFAULT_ROUNDS = 10  # without --requests: each client sends this many requests (a steady state, then the drain)
DEFAULT_REQUESTS = 1_000  # without --requests and without --concurrency (an open loop at --rate)


def default_requests(concurrency: int | None) -> int:
    """--requests when not given: ``DEFAULT_ROUNDS`` per client of --concurrency (at least 100), else 1,000."""
    return max(100, DEFAULT_ROUNDS * concurrency) if concurrency else DEFAULT_REQUESTS


def workload_from(values: dict[str, Any], cap: int | None = None) -> Workload:
    """``values``: WORKLOAD_FIELDS as given (None: not given); ``cap`` bounds a generated job's requests."""
    from kvplan.simulate.workload.files import load_file
    from kvplan.simulate.workload.generate import generated

    v = {k: values.get(k) for k in WORKLOAD_FIELDS}
    if v["workload"]:
        if v["requests"] or v["prompt_len"] or v["output_len"]:
            raise KvplanError("give either --workload FILE or --requests/--prompt-len/--output-len")
        return load_file(v["workload"], v["concurrency"], v["rate"], v["burstiness"] or 1.0, v["seed"] or 0)
    if not (v["prompt_len"] and v["output_len"]) or not (v["requests"] or v["concurrency"] or v["rate"]):
        raise KvplanError("no workload", "give --workload FILE, or --requests N --prompt-len P --output-len L "
                          "with --concurrency C and/or --rate R")
    requests = v["requests"] or default_requests(v["concurrency"])
    n = min(requests, cap) if cap else requests
    return generated(n, v["prompt_len"], v["output_len"], v["concurrency"], v["rate"], v["burstiness"] or 1.0,
                     v["prompt_dist"] or "fixed", v["output_dist"] or "fixed", v["max_new_tokens"],
                     v["shared_prefix"] or 0, v["prefix_groups"] or 1, v["seed"] or 0)
