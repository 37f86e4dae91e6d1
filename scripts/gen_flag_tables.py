#!/usr/bin/env python3
"""Regenerate src/kvplan/engines/{sglang,vllm}/flags.json from the released wheels, without importing an engine.

    python scripts/gen_flag_tables.py [--engine sglang|vllm|all] [--wheels /work/wheels] [--download]

Every wheel of the supported range found in --wheels is read with ``zipfile`` + ``ast`` (flagtables/): the argparse
parser of the launch entry point is rebuilt by a small interpreter over the source, each ``add_argument`` recorded
(option strings, action, nargs, type, choices, literal default, deprecation text). ``--download`` first fetches the
missing wheels of every release in the range with ``pip download --no-deps`` (into a temp dir, then moved). A new
engine release is one run of this script.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

from flagtables import table  # noqa: E402
from flagtables.source import WheelSource  # noqa: E402

from kvplan.engines.versions import Version  # noqa: E402

RANGES = {"sglang": ("0.3.0", "0.5.23.post99"), "vllm": ("0.6.0", "0.33.99")}
OUT = {"sglang": ROOT / "src/kvplan/engines/sglang/flags.json", "vllm": ROOT / "src/kvplan/engines/vllm/flags.json"}
# What release notes / deprecation messages say replaced a removed flag, where the code itself does not say it.
CURATED: dict[str, dict[str, dict[str, str]]] = {
    "vllm": {
        "--swap-space": {"replaced_by": "--kv-offloading-size",
                         "note": "V1 never used swap space; KV offload to CPU is --kv-offloading-size (0.11.1+)"},
        "--use-v2-block-manager": {"note": "v2 was the only block manager left; the flag did nothing"},
        "--max-seq-len-to-capture": {"replaced_by": "--max-cudagraph-capture-size",
                                     "note": "CUDA graph capture is sized by compilation config"},
    },
    "sglang": {},
}


def released_versions(pkg: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", pkg], capture_output=True, text=True,
                         check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("Available versions:"))
    lo, hi = (Version(v) for v in RANGES[pkg])
    return [v.strip() for v in line.split(":", 1)[1].split(",") if lo <= Version(v.strip()) <= hi]


def wheel_for(wheels: Path, pkg: str, version: str) -> Path | None:
    cands = sorted(wheels.glob(f"{pkg}-{version}-*.whl"))
    return cands[0] if cands else None


def download(wheels: Path, pkg: str, version: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tmp.", dir=wheels))
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{pkg}=={version}", "-d",
                        str(tmp)], check=True, capture_output=True)
        for w in tmp.glob("*.whl"):
            if not (wheels / w.name).exists():
                os.replace(w, wheels / w.name)
    finally:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()


def local_versions(wheels: Path, pkg: str) -> list[str]:
    lo, hi = (Version(v) for v in RANGES[pkg])
    vs = {p.name.split("-")[1] for p in wheels.glob(f"{pkg}-*.whl")}
    return sorted((v for v in vs if re.match(r"^\d", v) and lo <= Version(v) <= hi), key=Version)


def generate(engine: str, wheels: Path, fetch: bool, verbose: bool) -> dict:
    if engine == "sglang":
        from flagtables.sglang import extract
    else:
        from flagtables.vllm import extract
    versions = released_versions(engine) if fetch else local_versions(wheels, engine)
    per_version = []
    for v in sorted(versions, key=Version):
        w = wheel_for(wheels, engine, v)
        if w is None and fetch:
            download(wheels, engine, v)
            w = wheel_for(wheels, engine, v)
        if w is None:
            print(f"  {engine} {v}: no wheel, skipped", file=sys.stderr)
            continue
        src = WheelSource(w)
        got = extract(src)
        if verbose or got["warnings"]:
            print(f"  {engine} {v}: {len(got['specs'])} flags from {w.name}"
                  + (f"; {len(got['warnings'])} warnings: {got['warnings'][:3]}" if got["warnings"] else ""),
                  file=sys.stderr)
        per_version.append({"version": v, "file": w.name, "sha256": src.sha256, **got})
    return table.build(engine, per_version, CURATED.get(engine, {}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("sglang", "vllm", "all"), default="all")
    ap.add_argument("--wheels", type=Path, default=Path(os.environ.get("KVPLAN_WHEELS", "/work/wheels")))
    ap.add_argument("--download", action="store_true", help="pip download the missing wheels of the range first")
    ap.add_argument("--out-dir", type=Path, default=None, help="write <engine>.json here instead of src/")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    for engine in ("sglang", "vllm") if a.engine == "all" else (a.engine,):
        t = generate(engine, a.wheels, a.download, a.verbose)
        out = (a.out_dir / f"{engine}.json") if a.out_dir else OUT[engine]
        out.write_text(table.dump(t))
        print(f"{engine}: {len(t['versions'])} versions, {len(t['flags'])} flags -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
