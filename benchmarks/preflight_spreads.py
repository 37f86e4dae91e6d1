"""The observations behind ``src/kvplan/engines/spreads.json`` (``kvplan.engines.spreads``): each estimated budget
term's error against every corpus log that prints it, written by ``preflight.py --write-spreads``.

Per planned case (``preflight.plan_case``, the same command, GPU and version a user states) and per component
(``preflight_components.component_errors``: per rank, GiB, error = predicted - logged):

- ``<engine>/weights``: error / predicted weights (fraction), every version;
- ``vllm/activation-peak@<range>``: error / predicted peak (fraction); ``vllm/non-torch@<range>``: error (GiB);
- ``vllm/residual``: (KV-memory error + weights, activation and non-torch errors) / logged KV memory, on logs that
  print all four and whose plan estimates no other term (the budget is ``requested - sum(terms)``, so what is left
  is the error of the requested bytes and the allocator's rounding);
- ``sglang/residual``: (K+V size error - (mem_fraction_static x free-memory error - weights error)) / logged K+V
  size, on logs that print all three (``rest = P x mfs - W``, memory.py).

Per-range entries are written even below ``spreads.MIN_LOGS`` observations (the engine then keeps its hand range)
so the table shows what data there is.
"""

from __future__ import annotations

import json
from pathlib import Path

from corpus import load_cases
from preflight_components import component_errors

ROOT = Path(__file__).resolve().parents[1]
SPREADS_JSON = ROOT / "src" / "kvplan" / "engines" / "spreads.json"
VLLM_RESIDUAL_TERMS = {"torch-total-reserve", "weights", "activation-peak", "non-torch"}
DOC = ("Signed errors of kvplan's estimated budget terms against public startup logs (kvplan.engines.spreads "
       "documents the units and how a spread is taken from them). Written by benchmarks/preflight_spreads.py: "
       "PYTHONPATH=src python benchmarks/preflight.py --corpus tests/data/preflight --corpus ../shared/logcorpus "
       "--write-spreads. Do not edit by hand.")


def case_observations(case: dict, plan: dict, row: dict, corpus: str) -> list[tuple[str, dict]]:
    """(table key, observation) pairs of one planned case."""
    from kvplan.engines.spreads import version_range

    engine, version = plan["engine"], str(row.get("version"))
    rng = version_range(engine, version)
    comps = {c["component"]: c for c in component_errors(case, plan, row)}
    err = {k: c["predicted"] - c["logged"] for k, c in comps.items()}
    out: list[tuple[str, dict]] = []

    def add(key: str, error: float) -> None:
        out.append((key, {"case": case["id"], "corpus": corpus, "version": version, "error": round(error, 5)}))

    if "weights" in comps and comps["weights"]["predicted"]:
        add(f"{engine}/weights", err["weights"] / comps["weights"]["predicted"])
    if engine == "vllm":
        if "activation" in comps and comps["activation"]["predicted"]:
            add(f"vllm/activation-peak@{rng}", err["activation"] / comps["activation"]["predicted"])
        if "non-torch" in comps:
            add(f"vllm/non-torch@{rng}", err["non-torch"])
        terms = plan["settings"].get("kv_budget_terms") or []
        estimated = {t["name"] for t in terms if t["low_bytes"] != t["high_bytes"]}
        if {"weights", "activation", "non-torch", "kv memory"} <= comps.keys() and estimated <= VLLM_RESIDUAL_TERMS:
            add("vllm/residual", (err["kv memory"] + err["weights"] + err["activation"] + err["non-torch"])
                / comps["kv memory"]["logged"])
    elif {"baseline", "weights", "kv memory"} <= comps.keys():
        mfs = float(plan["settings"]["mem_fraction_static"])
        explained = mfs * err["baseline"] - err["weights"]
        add("sglang/residual", (err["kv memory"] - explained) / comps["kv memory"]["logged"])
    return out


def table(corpora: list[Path]) -> dict:
    """spreads.json's content: {"doc", "components": {key: {"unit", "observations"}}} over these corpora."""
    from preflight import plan_case

    comps: dict[str, dict] = {}
    for corpus in corpora:
        for case in load_cases(corpus):
            row, plan = plan_case(case, corpus)
            if row is None or plan is None:
                continue
            for key, obs in case_observations(case, plan, row, corpus.name):
                unit = "GiB" if key.startswith("vllm/non-torch") else "fraction"
                comps.setdefault(key, {"unit": unit, "observations": []})["observations"].append(obs)
    return {"doc": DOC, "components": dict(sorted(comps.items()))}


def write(corpora: list[Path], path: Path = SPREADS_JSON) -> str:
    """Write the table and return a one-line summary per component (n and the spread it gives)."""
    from kvplan.engines.spreads import MIN_LOGS, quantile

    t = table(corpora)
    path.write_text(json.dumps(t, indent=1) + "\n", encoding="utf-8")
    lines = [f"wrote {path}"]
    for key, entry in t["components"].items():
        errs = [abs(o["error"]) for o in entry["observations"]]
        what = (f"spread {quantile(errs):.4g} {entry['unit']}" if len(errs) >= MIN_LOGS
                else f"fewer than {MIN_LOGS} logs: hand range kept")
        lines.append(f"  {key:<34} n={len(errs):<3} {what}")
    return "\n".join(lines)
