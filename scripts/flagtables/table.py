"""Per-version argument lists -> one compact table: each flag's spec variants with the version ranges that have them.

Layout (read by src/kvplan/engines/flagtable.py):
  versions: ["0.3.0", ...] (sorted; ranges below are [first, last] indices into it, inclusive)
  wheels:   [{version, file, sha256}, ...]  (provenance: what was read)
  parser:   [{"in": ranges, allow_abbrev, underscores, dotted_json, ...}]  (the argparse front end per version)
  flags:    {primary option string: [{"in": ranges, opts, action, nargs, type, choices, default, ...}, ...]}
  removed:  {option string: {"replaced_by": flag or null, "note": text}}  (what the code/help says about removals)
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from flagtables.normalize import replacement_in


def ranges(indices: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in sorted(set(indices)):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _span(v: dict[str, Any]) -> set[int]:
    return {i for r in v["in"] for i in range(r[0], r[1] + 1)}


def primary(opts: list[str]) -> str:
    longs = [o for o in opts if o.startswith("--") and not o.startswith("--no-")]
    return (longs or [o for o in opts if o.startswith("--")] or opts)[0]


def build(engine: str, per_version: list[dict[str, Any]], curated: dict[str, dict[str, str]]) -> dict[str, Any]:
    """``per_version``: [{version, file, sha256, parser: {...}, specs: [...], positionals: [...]}], sorted."""
    versions = [pv["version"] for pv in per_version]
    variants: dict[str, dict[str, list[int]]] = defaultdict(dict)
    parser_variants: dict[str, list[int]] = {}
    for i, pv in enumerate(per_version):
        seen: set[str] = set()
        for spec in pv["specs"]:
            key = primary(spec["opts"])
            if key in seen:
                continue  # argparse would refuse a duplicate; the first definition is the one recorded
            seen.add(key)
            variants[key].setdefault(json.dumps(spec, sort_keys=True), []).append(i)
        parser_variants.setdefault(json.dumps(pv["parser"], sort_keys=True), []).append(i)
    flags: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(variants):
        flags[key] = [{"in": ranges(idx), **{k: v for k, v in json.loads(s).items()}}
                      for s, idx in sorted(variants[key].items(), key=lambda kv: kv[1][0])]
    removed: dict[str, dict[str, Any]] = {}
    last = len(versions) - 1
    alive: dict[str, set[int]] = defaultdict(set)  # option string -> versions that accept it
    for vs in flags.values():
        for v in vs:
            for r in v["in"]:
                for o in v["opts"]:
                    alive[o].update(range(r[0], r[1] + 1))
    for opt in sorted(alive):
        end = max(alive[opt])
        if end == last:
            continue
        key = next(k for k, vs in flags.items() if any(opt in v["opts"] and end in _span(v) for v in vs))
        note = next((v.get("deprecated") for v in reversed(flags[key]) if v.get("deprecated")), None)
        repl = [f for f in replacement_in(note or "", [opt]) if end + 1 in alive.get(f, ())]
        entry: dict[str, Any] = {"replaced_by": repl[0] if repl else None}
        if note:
            entry["note"] = note
        entry.update(curated.get(opt, {}))
        removed[opt] = entry
    return {
        "engine": engine,
        "generated_by": "scripts/gen_flag_tables.py (ast over the released wheels; nothing imported)",
        "versions": versions,
        "wheels": [{"version": pv["version"], "file": pv["file"], "sha256": pv["sha256"]} for pv in per_version],
        "parser": [{"in": ranges(idx), **json.loads(s)} for s, idx in sorted(parser_variants.items(),
                                                                             key=lambda kv: kv[1][0])],
        "flags": flags,
        "removed": removed,
    }


def dump(table: dict[str, Any]) -> str:
    """JSON with one flag (and one wheel) per line: small, and a regeneration diffs line by line."""
    def one(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), sort_keys=False)

    lines = ["{"]
    for k in ("engine", "generated_by"):
        lines.append(f"  {one(k)}: {one(table[k])},")
    lines.append(f'  "versions": {one(table["versions"])},')
    lines.append('  "wheels": [')
    lines.append(",\n".join(f"    {one(w)}" for w in table["wheels"]))
    lines.append("  ],")
    lines.append('  "parser": [')
    lines.append(",\n".join(f"    {one(p)}" for p in table["parser"]))
    lines.append("  ],")
    lines.append('  "flags": {')
    lines.append(",\n".join(f"    {one(k)}: {one(v)}" for k, v in table["flags"].items()))
    lines.append("  },")
    lines.append('  "removed": {')
    lines.append(",\n".join(f"    {one(k)}: {one(v)}" for k, v in table["removed"].items()))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
