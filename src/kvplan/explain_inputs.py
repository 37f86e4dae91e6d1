"""What ``kvplan explain`` takes from the log itself when the user gives nothing else: the GPU (from the memory
figures the log printed, ``Engine.log_gpu``), a printed version with build tags kvplan does not read, and the one
line that says why nothing could be planned.

A log is read far from the GPUs that wrote it (pasted into a ticket): the log's own figures come before this
machine's GPUs, and a figure the log does not give is named, with the option that supplies it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.base import Engine
    from kvplan.engines.loggpu import LogGpu
    from kvplan.logs.facts import LogFacts

_RELEASE = re.compile(r"^v?\d+\.\d+(?:\.\d+)?(?:\.\d+)?(?:[.-]?(?:post|rc|dev|a|b)\.?\d*)?")
GPU_OPTIONS = "--gpu NAME or --gpu-mem-mib N"


def readable_version(text: str) -> tuple[str, str | None]:
    """(a version kvplan reads, a note) for a printed version: "0.11.0rc2.dev98+g393de22d2" -> "0.11.0rc2" (the
    first pre/post tag of the release; later dev and local tags dropped)."""
    from kvplan.engines.versions import Version
    from kvplan.errors import KvplanError

    try:
        Version(text)
        return text, None
    except KvplanError:
        pass
    m = _RELEASE.match(text.strip())
    if not m:
        return text, None
    return m.group(0), f"read as {m.group(0)}"


def gpu_from_log(engine: Engine, facts: LogFacts, opts: dict[str, Any], missing: list[str]) -> LogGpu | None:
    """Set ``gpu_mem_mib`` (and the GPU's label) in ``opts`` from the log when no GPU option was given; say in
    ``missing`` when the total is a lower bound, not a printed figure."""
    if opts.get("gpu") or opts.get("gpu_mem_mib"):
        return None
    found = engine.log_gpu(facts)
    if found is None:
        return None
    opts["gpu_mem_mib"], opts["gpu"] = found.mem_mib, found.label
    if not found.exact:
        missing.append(f"GPU memory.total (the log prints none): planned as {found.mem_mib:,} MiB, {found.how}; the "
                       f"KV figures do not depend on it, what the engine sizes by GPU (defaults by GPU size, "
                       f"headroom) does: pass {GPU_OPTIONS} for those")
    return found


def why_unplanned(error: str, lacking: list[str], gpu_given: bool) -> str:
    """One line: what could not be planned and which figure (and option) would make it plannable. ``lacking``: the
    measured inputs the log lacks (``Engine.observed_inputs``' notes, "figure ('log line'): estimate")."""
    if gpu_given or "no GPU" not in error:
        return error
    lacks = "; ".join(m.split(":")[0] for m in lacking) or "any figure that bounds the GPU's memory"
    return (f"no GPU given, and the log lacks {lacks} — pass {GPU_OPTIONS} (or the figure: --free-gib, "
            "--kv-memory-gib)")
