"""Leave-one-out for ``benchmarks/preflight.py``: each log planned again with every calibration it feeds refitted
without it, so the figure is not the model grading the data it was fitted on.

Which calibrations a log feeds: its ``source`` (URL, or ``find_string`` index id) or its case id cited by kvplan's
calibration data.

- ``engines/sglang/baseline_data.py`` (SGLang's free-memory baseline, medians over ``POINTS``): refitted without the
  points whose source is the log's (``baseline._fit``), as ``baseline.residuals(leave_one_out=True)`` does.
- ``hardware/gpus.json`` ``torch_total_*`` (vLLM's torch-visible total per GPU): the GPU's own figure is dropped
  and the generic ``TORCH_TOTAL_RESERVE`` used, as for an uncatalogued GPU.
- ``engines/spreads.json`` (each estimated term's spread, a quantile of its errors on the corpus logs): every
  spread taken without the log's own observations (``spreads.excluding``), so a log never sets its own band.
- Any other calibration module citing the log (``engines/*/calibration.py``, ``load_calibration.py``): its figures
  are fixed numbers read by hand from a few sources, not refittable; the log is then left out of the leave-one-out
  figure and counted as such ("fixed"), never scored in-sample.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kvplan"
FS_RE = re.compile(r"find_string(?: index id|:)\s*(\d{6,})")
URL_RE = re.compile(r"https?://[^\s,;)\]\"']+")


def source_keys(text: str) -> frozenset[str]:
    """The URLs (scheme, ``www.``, fragment and trailing slash dropped) and find_string ids a source names."""
    out = set()
    for u in URL_RE.findall(text or ""):
        out.add(re.sub(r"^https?://(www\.)?", "", u.split("#")[0].rstrip("/.")))
    out.update(FS_RE.findall(text or ""))
    out.update(re.findall(r"FS\.format\((\d{6,})\)", text or ""))
    return frozenset(out)


@lru_cache(maxsize=1)
def _calibration_texts() -> dict[str, str]:
    """Calibration modules (path under src/kvplan -> text): every engine module whose name says it holds data."""
    mods = [p for p in (SRC / "engines").rglob("*.py") if "calibration" in p.name or p.name == "baseline_data.py"]
    return {str(p.relative_to(SRC)): p.read_text(encoding="utf-8") for p in mods}


@lru_cache(maxsize=1)
def _gpu_torch_sources() -> dict[str, frozenset[str]]:
    gpus = json.loads((SRC / "hardware" / "gpus.json").read_text(encoding="utf-8"))["gpus"]
    return {g["name"]: source_keys(f"{g.get('torch_total_source') or ''} {g.get('torch_total_note') or ''}")
            for g in gpus if g.get("torch_total_mib")}


def _cites(text: str, key: str) -> bool:
    """``key`` in ``text`` as a whole (issues/1351 is not issues/13513)."""
    return re.search(re.escape(key) + r"(?![0-9A-Za-z_])", text) is not None


def feeds(case: dict) -> dict[str, list[str]]:
    """Calibration data that cites this case's source: {module or 'hardware/gpus.json': [what]}."""
    keys = source_keys(str(case.get("source") or ""))
    cid = str(case.get("id") or "")
    out: dict[str, list[str]] = {}
    for path, text in _calibration_texts().items():
        if any(_cites(text, k) for k in keys):
            out.setdefault(path, []).append("cites the source")
        tail = cid.split("-", 2)[2] if cid.count("-") >= 2 else ""  # "A / -tail": a sibling id abbreviated
        if cid and (_cites(text, cid) or (len(tail) >= 15 and _cites(text, "-" + tail))):
            out.setdefault(path, []).append("cites the case id")
    for gpu, srcs in _gpu_torch_sources().items():
        if keys & srcs:
            out.setdefault("hardware/gpus.json", []).append(gpu)
    return out


@contextlib.contextmanager
def _sglang_baseline_without(keys: frozenset[str]) -> Iterator[None]:
    from kvplan.engines.sglang import baseline as bl

    kept = tuple(p for p in bl.POINTS if not source_keys(p.source) & keys)
    fit = bl._fit(kept)
    old = bl._default_fit
    bl._default_fit = lambda: fit  # type: ignore[assignment]
    bl.baseline_overhead.cache_clear()
    try:
        yield
    finally:
        bl._default_fit = old  # type: ignore[assignment]
        bl.baseline_overhead.cache_clear()


@contextlib.contextmanager
def _torch_total_without(gpus: list[str]) -> Iterator[None]:
    from kvplan.engines.vllm import calibration as cal
    from kvplan.engines.vllm import startup

    old = cal.catalogued_reserve
    dropped = set(gpus)

    def reserve(gpu_name: str | None) -> cal.Calibration | None:
        from kvplan.hardware.gpus import find_gpu

        g = find_gpu(gpu_name)
        return None if g is not None and g.name in dropped else old(gpu_name)

    cal.catalogued_reserve = reserve  # type: ignore[assignment]
    startup.catalogued_reserve = reserve  # type: ignore[assignment]
    cal.torch_reserve.cache_clear()
    try:
        yield
    finally:
        cal.catalogued_reserve = old  # type: ignore[assignment]
        startup.catalogued_reserve = old  # type: ignore[assignment]
        cal.torch_reserve.cache_clear()


REFITTABLE = ("engines/sglang/baseline_data.py", "hardware/gpus.json")


def feeds_spreads(case: dict) -> bool:
    """Whether ``engines/spreads.json`` holds an observation of this case."""
    from kvplan.engines import spreads

    return any(o["case"] == case.get("id") for e in spreads._table().values() for o in e["observations"])


def loo_row(case: dict, run: Callable[[], dict | None]) -> dict | None:
    """``run()`` (the benchmark's own case runner) with this case's calibrations refitted without it; the row gets
    ``loo``: "held-out" (feeds nothing), "refit" (refitted), or "fixed: <module>" (not refittable: not scored)."""
    fed = feeds(case)
    fixed = sorted(m for m in fed if m not in REFITTABLE)
    if fixed:
        row = run()
        return None if row is None else dict(row, loo="fixed: " + ", ".join(fixed), error_pct=None)
    from kvplan.engines import spreads

    keys = source_keys(str(case.get("source") or ""))
    with contextlib.ExitStack() as stack:
        stack.enter_context(spreads.excluding(frozenset({str(case.get("id"))})))
        if "engines/sglang/baseline_data.py" in fed:
            try:
                stack.enter_context(_sglang_baseline_without(keys))
            except KeyError:  # the only log of its platform: nothing left to fit
                row = run()
                return None if row is None else dict(row, loo="fixed: only log of its platform", error_pct=None)
        if "hardware/gpus.json" in fed:
            stack.enter_context(_torch_total_without(fed["hardware/gpus.json"]))
        row = run()
    return None if row is None else dict(row, loo="refit" if fed or feeds_spreads(case) else "held-out")
