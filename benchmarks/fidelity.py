"""Fidelity of kvplan on real logs: run ``explain`` over every case of ../shared/logcorpus and compare the
KV token count each log printed with kvplan's prediction.

    python benchmarks/fidelity.py [--corpus DIR] [--json]

Prints one row per case (case, engine, version, model, observed tokens, predicted, error %) and a last line
``fidelity: N cases; reproduced R (r %): X % within 0.5 %, Y % within 1 %; estimated E (e %): Z % within 2 %;
unsupported U (u %)``. Reproduced: the log carries every input (kvplan must match it); estimated: the log lacks an
input kvplan then estimates (named in the row); unsupported: the log lacks a token count, kvplan cannot identify
its model or GPU, or the plan refuses it (the reason is printed). Known misses are expected failures with their
reason in tests/test_reference_logs.py, never a stored copy of kvplan's own output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from corpus import DEFAULT_CORPUS, engine_version, gpu_option, load_cases, model_id  # noqa: E402
from corpus import command as case_command  # noqa: E402


def run_case(case: dict, corpus: Path) -> dict:
    from kvplan.errors import KvplanError
    from kvplan.explain import explain
    from kvplan.models.catalog import catalog_entry

    row = {"id": case["id"], "engine": case["engine"], "model": case.get("model"), "observed": None,
           "predicted": None, "error_pct": None, "reason": None}
    opts = {**gpu_option(case), "host_mem_gib": 2048.0}
    if engine_version(case):
        opts["engine_version"] = engine_version(case)
    row["version"] = opts.get("engine_version", "?")
    model = model_id(case)
    if catalog_entry(model) is None:
        row["reason"] = f"model {model!r} not in the catalog (pass --model-config)"
    try:
        res = explain(str(corpus / case["raw_file"]), case_command(case), **opts)
    except KvplanError as e:
        row["reason"] = str(e)
        return row
    except Exception as e:  # noqa: BLE001 - a crash is a bug: show it in the table, keep going
        row["reason"] = f"CRASH {type(e).__name__}: {e}"
        return row
    obs = res.observed().get("kv_tokens")
    row["observed"] = obs
    if res.check is None:
        row["reason"] = row["reason"] or res.unsupported
        return row
    pred = res.to_dict()["predicted"].get("kv_tokens")
    row["predicted"] = pred
    if obs:
        row["error_pct"] = round((pred - obs) / obs * 100, 3)
        row["reason"] = None
        if res.missing:  # the log lacks figures the computation needs: an estimate, not a reproduction
            row["estimated"] = True
            row["reason"] = "estimated; the log lacks: " + "; ".join(m.split(" (")[0] for m in res.missing)
    else:
        row["reason"] = "the log prints no KV token count"
    return row


def run(corpus: Path) -> list[dict]:
    return [run_case(c, corpus) for c in load_cases(corpus)]


def supported(rows: list[dict]) -> list[dict]:
    """Cases whose log carries every figure the computation needs (and a KV token count to compare)."""
    return [r for r in rows if r["error_pct"] is not None and not r.get("estimated")]


def summary(rows: list[dict]) -> str:
    """What it counts, each group with its own share of the cases: reproduced (the log has every input: kvplan
    must match it), estimated (the log lacks an input kvplan then estimates), unsupported (no comparison)."""
    total = len(rows)
    done = supported(rows)
    est = [r for r in rows if r.get("estimated")]
    n, m = len(done), len(est)

    def share(k: int, of: int) -> str:
        return f"{100 * k / of:.0f} %" if of else "n/a"

    w05 = sum(1 for r in done if abs(r["error_pct"]) <= 0.5)
    w1 = sum(1 for r in done if abs(r["error_pct"]) <= 1.0)
    e2 = sum(1 for r in est if abs(r["error_pct"]) <= 2.0)
    return (f"fidelity: {total} cases; reproduced {n} ({share(n, total)}): {share(w05, n)} within 0.5 %, "
            f"{share(w1, n)} within 1 %; estimated {m} ({share(m, total)}): {share(e2, m)} within 2 %; "
            f"unsupported {total - n - m} ({share(total - n - m, total)})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run(Path(a.corpus))
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        head = f"{'case':<48} {'engine':<7} {'version':<12} {'observed':>10} {'predicted':>10} {'error %':>8}"
        print(head + "  model / reason")
        for r in rows:
            err = "" if r["error_pct"] is None else f"{r['error_pct']:+.3f}"
            tail = r["model"] if r["reason"] is None else f"{r['model']} — {r['reason']}"
            print(f"{r['id'][:48]:<48} {r['engine']:<7} {str(r['version'])[:12]:<12} {str(r['observed'] or ''):>10} "
                  f"{str(r['predicted'] or ''):>10} {err:>8}  {tail}")
    print(summary(rows))


if __name__ == "__main__":
    main()
