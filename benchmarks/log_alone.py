"""``kvplan explain LOG --model-config config.json`` and nothing else (no --gpu, no launch command), over real logs:
how many reproduce the KV capacity they logged, and whether every other one says which figure it lacks (issue #12).

    python benchmarks/log_alone.py [--corpus DIR ...]

Each case gets only its model's config.json (the corpus' vendored copy, else the catalog's config written to a temp
file). A case counts as: ``reproduced`` (within 1 % of the logged KV tokens), ``named`` (off by more, with the
missing figures named in ``missing[]``), ``refused`` (exit 2: the one-line reason names the figure), or ``silent``
(off by more than 1 % with nothing named: a bug). Cases whose log prints no KV count are left out. Last line:
``log alone: N cases, X % within 1 %, named M, refused R, silent S``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from corpus import DEFAULT_CORPUS, HELDOUT_CORPUS, load_cases, model_config, model_id  # noqa: E402


def config_for(case: dict, corpus: Path, tmp: Path) -> str | None:
    from kvplan.models.catalog import catalog_entry

    vendored = model_config(case, corpus)
    if vendored:
        return vendored
    entry = catalog_entry(model_id(case)) if model_id(case) else None
    if entry is None:
        return None
    p = tmp / (entry["id"].replace("/", "__") + ".json")
    p.write_text(json.dumps(entry["config"]))
    return str(p)


def run_case(case: dict, corpus: Path, tmp: Path) -> dict:
    from kvplan.errors import KvplanError
    from kvplan.explain import explain

    row = {"id": case["id"], "observed": None, "predicted": None, "error_pct": None, "kind": None, "why": ""}
    cfg = config_for(case, corpus, tmp)
    try:
        res = explain(str(corpus / case["raw_file"]), None, **({"model_config": cfg} if cfg else {}))
    except KvplanError as e:
        row["kind"], row["why"] = "refused", str(e)
        return row
    row["observed"] = res.observed().get("kv_tokens")
    if res.check is None:
        row["kind"], row["why"] = "refused", res.unsupported or ""
        return row
    row["predicted"] = res.to_dict()["predicted"].get("kv_tokens")
    if row["observed"] and row["predicted"] is not None:
        row["error_pct"] = round((row["predicted"] - row["observed"]) / row["observed"] * 100, 3)
    named = [m for m in res.missing if not m.startswith("GPU memory.total")]
    if row["error_pct"] is not None and abs(row["error_pct"]) <= 1.0:
        row["kind"] = "reproduced"
    else:
        row["kind"], row["why"] = ("named", "; ".join(m.split(":")[0] for m in named)) if named else ("silent", "")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for corpus in a.corpus or [DEFAULT_CORPUS, HELDOUT_CORPUS]:
            rows += [run_case(c, corpus, Path(tmp)) for c in load_cases(corpus)]
    counted = [r for r in rows if r["observed"] or r["kind"] == "refused"]
    if a.json:
        print(json.dumps(counted, indent=1))
    else:
        for r in counted:
            print(f"{r['id'][:52]:52s} {r['kind']:10s} {r['observed'] or '':>9} {r['predicted'] or '':>9} "
                  f"{'' if r['error_pct'] is None else format(r['error_pct'], '+.2f') + ' %':>9}  {r['why'][:90]}")
    n = len(counted)
    k = {kind: sum(1 for r in counted if r["kind"] == kind) for kind in ("reproduced", "named", "refused", "silent")}
    pct = f"{100 * k['reproduced'] / n:.0f} %" if n else "n/a"
    print(f"log alone: {n} cases, {pct} within 1 %, named {k['named']}, refused {k['refused']}, silent {k['silent']}")


if __name__ == "__main__":
    main()
