"""vLLM startup-log parser: the figures vLLM prints while it sizes its KV cache, as LogFacts.

Formats known (reference notes §4; vLLM 0.2 to 0.33):
- V0 0.2-0.6: "Loading model weights took X GB", "# GPU blocks: N, # CPU blocks: M", from 0.6 "Maximum concurrency for
  L tokens per request: Xx"; 0.6.4 one-line "Memory profiling results: total_gpu_memory=..."; ~0.6.5 multi-line table.
- V0 0.7-0.10: worker.py "Memory profiling takes" / "the current vLLM instance can use total_gpu_memory (X) x
  gpu_memory_utilization (u) = Y" / "model weights take ...; non_torch_memory takes ...; ... KV Cache is X GiB",
  "# cuda blocks: N, # CPU blocks: M", "Model loading took X GB and ...".
- V1: early (0.7) "# GPU blocks: N"; 0.8-0.27 "Model loading took X GiB [memory] and", "Available KV cache memory",
  two lines "GPU KV cache size: N tokens" + "Maximum concurrency ..."; >= 0.28 one line "<GPU|CPU|GPU + host> KV cache
  size: N tokens, Maximum concurrency ..."; kv_cache_memory_bytes "Initial free memory X GiB, reserved Y GiB"; CPU
  backend "Explicitly/Auto set (a/b) GiB for KV cache"; "Graph capturing finished ... took X GiB"; >= 0.18 "Estimated
  CUDA graph memory"; >= 0.21 "CUDA graph pool memory" and "Free memory on device (F/T GiB) on startup ...".
- Launch args from "non-default args: {...}", "args: Namespace(...)" and "Initializing ... LLM engine (vX) with config:"
  (vLLM's own names); the version from that line, "vLLM API server version X" or the startup banner.

Prefixes "(VllmWorker rank=3 pid=..)", "(Worker_TP1 pid=..)", "(EngineCore_DP0 pid=..)" name the rank ("rank=3",
"Worker_TP1", "EngineCore_DP0"; 0.10's "VllmWorker TP1" as "Worker_TP1"; "VllmWorkerProcess pid=N" for V0 workers;
"" when unprefixed). A figure printed twice
(restarts, several ranks on one line kind) keeps its first value. Figures LogFacts has no field for go into ``args``:
requested_memory_gib (total x utilization), free_memory_gib, node_memory_gib, non_kv_gib,
initial_memory_usage_gib, peak_torch_memory_gib, memory_usage_post_profile_gib, weights_plus_non_torch_gib,
kv_needed_gib, estimated_max_model_len, suggested_kv_cache_memory_bytes(_full), total_cpu_memory_gib,
VLLM_CPU_KVCACHE_SPACE; swap_space, gpu_memory_utilization, max_seq_len also when only a message shows them, and
block_size replaced by the engine's own choice ("Setting kv cache block size to N", "overriding user-specified").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from kvplan.engines.versions import Version
from kvplan.logs.facts import LogFacts, RankFacts

N = r"(-?\d+(?:\.\d+)?)"
G = r" ?GiB"
LATEST = "99.0"  # "and later" in a format hint
PREFIX = re.compile(r"\((\w[\w.-]*?)(?: rank=(\d+)| (TP\d+))? pid=(\d+)(?:, ip=[\w.:-]+)?\)")
HEADER = re.compile(r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL) +\d\d-\d\d [\d:.]+ \[?[\w./-]+:\d+\] ?")
TOKEN = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[()\[\]{}<>,]""")
ITEM = re.compile(r"""\s*(?:\.\.\.\s*)?['"]?([A-Za-z_]\w*)['"]?\s*[:=]\s*(.*)""", re.S)  # "... k=v": an elision
LOAD = re.compile(r"(Model loading|Loading model weights) took (-?\d+(?:\.(\d+))?)(?![\d.])(?!\s*s)\s*(GiB|GB)?"
                  r"( memory)?")
USAGE = re.compile(N + r" GiB for (consumed|weight|peak activation|non-torch|CUDAGraph)")
USAGE_KEYS = {"consumed": "weights_plus_non_torch_gib", "weight": "weights_gib", "non-torch": "non_torch_gib",
              "peak activation": "activation_peak_gib", "CUDAGraph": "graph_mem_gib"}
SUGGEST = re.compile(r"--kv-cache-memory=(\d+)")
VERSIONS = (re.compile(r"LLM engine \(v([^)\s]+)\)"), re.compile(r"vLLM API server version v?(\S+)"),
            re.compile(r"[█▀▄].*\bversion v?(\d+\.\d+[\w.+-]*)"))
# (substring(s) that gate the regex, regex, targets by group: RankFacts field, ".LogFacts field" or args key, hint)
RULES = [(g, re.compile(rx), t, h) for g, rx, t, h in (
    ("took", r"Graph capturing finished in [\d.]+ secs?, took " + N + G, ("graph_mem_gib",), ""),
    ("Available KV", r"Available KV cache memory: " + N + G, ("available_kv_gib",), "avail"),
    ("Estimated CUDA", r"Estimated CUDA graph memory: " + N + G, ("cudagraph_estimate_gib",), "est"),
    ("graph pool", r"CUDA graph pool memory: " + N + G + r" \(actual\)(?:, " + N + G + r" \(estimated\))?",
     ("graph_mem_gib", "cudagraph_estimate_gib"), "pool"),
    ("Initial free", r"Initial free memory " + N + G + ", reserved " + N + G + " memory for KV Cache",
     ("free_memory_gib", "available_kv_gib"), ""),
    ("set (", r"(?:Explicitly|Auto) set \(" + N + "/" + N + r"\) GiB for KV cache(?:.*?with " + N + r" GiB requested)?"
     r"(?:.*? " + N + r" GiB memory was consumed by non-kv)?",
     ("available_kv_gib", "node_memory_gib", "requested_memory_gib", "non_kv_gib"), ""),
    ("on startup", r"(?:Free memory on device \(" + N + "/" + N + r"|Available memory on node \d+ \(" + N + "/" + N
     + r") ?GiB\) on startup(?:\. Desired| is less than desired) \w+ memory utilization(?: is)? \(" + N + ", " + N + G,
     ("free_memory_gib", "total_gpu_gib", "free_memory_gib", "node_memory_gib", "gpu_memory_utilization",
      "requested_memory_gib"), ""),
    ("in use is", r"Current kv cache memory in use is " + N + G, ("available_kv_gib",), ""),
    ("swap space", r"large swap space\. " + N + " GiB out of the " + N + " GiB total CPU", ("swap_space",
     "total_cpu_memory_gib"), ""),
    ("can use", r"can use(?: total_gpu_memory \(" + N + G + r"\) x gpu_memory_utilization \(" + N + r"\) =)?\s*" + N
     + G, ("total_gpu_gib", "gpu_memory_utilization", "requested_memory_gib"), "prof"),
    ("total_gpu_memory", r"total_gpu_memory[ =(]*" + N, ("total_gpu_gib",), "prof"),
    ("weights take", r"model weights take\s+" + N, ("weights_gib",), "prof"),
    ("non_torch_memory", r"non_torch_memory(?: takes)?[ =]*" + N, ("non_torch_gib",), "prof"),
    ("activation peak", r"activation peak memory(?: takes)?\s+" + N, ("activation_peak_gib",), "prof"),
    (("KV Cache is", "kv_cache_memory", "kv_cache_size="),
     r"(?:reserved for KV Cache is|available_kv_cache_memory|kv_cache_size=)\s*" + N, ("available_kv_gib",), "prof"),
    ("gpu_memory_utilization", r"gpu_memory_utilization[ =(]*" + N, ("gpu_memory_utilization",), "prof"),
    ("_memory_usage=", r"initial_memory_usage=" + N + ".*peak_torch_memory=" + N + ".*memory_usage_post_profile="
     + N, ("initial_memory_usage_gib", "peak_torch_memory_gib", "memory_usage_post_profile_gib"), "prof"),
    ("KV cache size", r"([A-Za-z]\w*(?: \+ [A-Za-z]\w*)*) KV cache size: ([\d,]+) tokens(, Maximum)?",
     (".device_word", ".kv_tokens", None), "kv"),
    ("concurrency", r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.,]+)x",
     (".concurrency_len", ".max_concurrency"), ""),
    ("stored in KV", r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV "
     r"cache \((\d+)\)", ("max_seq_len", ".kv_tokens"), ""),
    ("blocks: ", r"(?<!\w)(GPU|cuda|CUDA|XPU|xpu|HPU|hpu|NPU|npu|TPU|tpu|neuron) blocks: (\d+)(?:, # CPU blocks: "
     r"(\d+))?",
     (None, ".gpu_blocks", ".cpu_blocks"), "blocks"),
    ("To serve at", r"max seq len \((\d+)\), \(" + N + r" GiB KV cache is needed.*?available KV cache memory \(" + N
     + r" GiB\)(?:.*?estimated maximum model length is (\d+))?",
     ("max_seq_len", "kv_needed_gib", "available_kv_gib", "estimated_max_model_len"), ""),
    ("block size to", r"Setting (?:kv cache|attention) block size to (\d+)", ("!block_size",), ""),
    ("overriding", r"requires block_size=(\d+), overriding", ("!block_size",), ""),
    ("max model len", r"Using max model len (\d+)", (".context_len",), ""),
    ("KVCACHE_SPACE", r"VLLM_CPU_KVCACHE_SPACE.*?using " + N + " by default", ("VLLM_CPU_KVCACHE_SPACE",), ""),
)]
ERRORS = ("No available memory for the cache blocks", "To serve at least one request with the model",
          "is less than desired", "CUDA out of memory", "Insufficient space in /dev/shm", "Too large swap space",
          "can be stored in KV cache", "ValueError:", "RuntimeError:", "OutOfMemoryError")
VLLM_ONLY = ("vLLM API server version", "LLM engine (v", "non-default args: {", "Model loading took",
             "Loading model weights took", "# GPU blocks:", "# cuda blocks:", "# CUDA blocks:", "KV cache size: ",
             "Maximum concurrency for ", "Avg prompt throughput:", "Available KV cache memory:", "(EngineCore",
             "(APIServer pid=", "(VllmWorker", "(Worker_TP", "Memory profiling takes", "the current vLLM instance",
             "Graph capturing finished in", "Estimated CUDA graph memory", "CUDA graph pool memory",
             "for the cache blocks", "[gpu_model_runner.py:", "[kv_cache_utils.py:", "[gpu_worker.py:",
             "GiB for KV cache on node", "# CPU blocks:", "stored in KV cache", "large swap space", "Memory profiling",
             "available_kv_cache_memory", "non_torch_memory", "To serve at least one request",
             "Avg generation throughput", "GPU KV cache usage")
# marker -> (generation, first version, last version, what shows it); version_hint is their intersection
HINTS = {
    "loadgb": ("", "0.4", "0.7.99", "'Loading model weights took X GB'"),
    "load_gb": ("V0", "0.8", "0.10.99", "'Model loading took X GB'"),
    "load_gib": ("V1", "0.8", "0.11.99", "'Model loading took X GiB and'"),
    "load_mem4": ("V1", "0.12", "0.13.99", "'Model loading took X.XXXX GiB memory'"),
    "load_mem2": ("V1", "0.14", LATEST, "'Model loading took X.XX GiB memory'"),
    "prof_one": ("V0", "0.6.4", "0.6.4", "one-line profiling results"),
    "prof_multi": ("V0", "0.6.5", "0.6.6", "multi-line profiling table"),
    "prof_worker": ("V0", "0.6.6", "0.10.99", "worker.py profiling lines"),
    "blocks_v0": ("V0", "0.2", "0.6.99", "'# GPU blocks, # CPU blocks'"),
    "blocks_cuda": ("V0", "0.7", "0.10.99", "'# cuda blocks'"), "pool": ("V1", "0.21", LATEST, "CUDA graph pool line"),
    "blocks_v1": ("V1", "0.7", "0.7.99", "'# GPU blocks' alone"), "est": ("V1", "0.18", LATEST, "CUDA graph estimate"),
    "avail": ("V1", "0.9.2", LATEST, "'Available KV cache memory'"),
    "kv_one": ("V1", "0.28", LATEST, "one-line KV size"),
    "kv_two": ("V1", "0.8", "0.27.99", "two-line KV size"), "kv_dev": ("V1", "0.30", LATEST, "device word in KV size"),
    "v1prefix": ("V1", "0.10", LATEST, "Worker_/EngineCore_ prefixes"),
    "tpprefix": ("V1", "0.10", "0.10.99", "'VllmWorker TPn' prefix"),
    "rankprefix": ("V1", "0.8", "0.9.99", "'VllmWorker rank=' prefix"),
    "v0prefix": ("V0", "0.4", "0.10.99", "VllmWorkerProcess prefix"),
}
SINGLE = {"EngineCore", "APIServer", "Worker", "VllmWorker"}
FLOATS = ("_gib", "concurrency", "utilization", "swap_space", "KVCACHE_SPACE")


def looks_like(line: str) -> bool:
    """True for lines only vLLM prints."""
    return any(s in line for s in VLLM_ONLY)


def _items(s: str) -> dict[str, Any]:
    """Top-level `k=v` / `'k': v` items of a dump up to its closing bracket; literals parsed, other values as text."""
    parts, depth, start, end = [], 0, 0, len(s)
    for m in TOKEN.finditer(s):
        c = m.group()
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
            if depth < 0:
                end = m.start()
                break
        elif c == "," and depth == 0:
            parts.append(s[start:m.start()])
            start = m.end()
    parts.append(s[start:end])
    out: dict[str, Any] = {}
    for part in parts:
        item = ITEM.match(part)
        raw = item.group(2).strip().removesuffix("...").rstrip() if item else ""
        if raw in ("", "'...'", '"..."') or item is None:
            continue
        try:
            out[item.group(1)] = ast.literal_eval(raw) if len(raw) < 20000 else raw
        except Exception:
            out[item.group(1)] = raw
    return out


class _State:
    def __init__(self) -> None:
        self.f = LogFacts(engine="vllm")
        self.hints: set[str] = set()
        self.config_model: str | None = None
        self.seen: set[str] = set()
        self.label: str | None = None  # of the current line, computed on first use

    def rank_label(self, line: str) -> str:
        if self.label is None:
            self.label = ""
            m = PREFIX.search(line, 0, 400) if "pid=" in line else None
            if m:
                name, rank, tp, pid = m.groups()
                if rank or tp:
                    self.hints.add("rankprefix" if rank else "tpprefix")
                    self.label = f"rank={rank}" if rank else f"Worker_{tp}"
                    return self.label
                if name.startswith(("Worker_", "EngineCore_")):
                    self.hints.add("v1prefix")
                elif name == "VllmWorkerProcess":
                    self.hints.add("v0prefix")
                self.label = name if name in SINGLE or any(c.isdigit() for c in name) else f"{name} pid={pid}"
        return self.label

    def put(self, line: str, target: str | None, text: str | None) -> None:
        if target is None or text is None:
            return
        if target[0] == "!":  # the engine's own choice replaces a launch arg
            if text.isdigit():
                self.f.args[target[1:]] = int(text)
            return
        t = text.replace(",", "")
        try:
            value: Any = float(t) if target.endswith(FLOATS) or "." in t else int(t) if t.lstrip("-").isdigit() else t
        except ValueError:  # a mangled number ("4096..00") is dropped, the line's other figures kept
            return
        if target.startswith("."):
            if getattr(self.f, target[1:]) is None:
                setattr(self.f, target[1:], value)
        elif target in RankFacts.__dataclass_fields__:
            rf = self.f.rank(self.rank_label(line))
            if getattr(rf, target) is None:
                setattr(rf, target, value)
        elif self.f.args.get(target) is None:
            self.f.args[target] = value


def _rules(st: _State, line: str) -> bool:
    hit = False
    if "took" in line and (m := LOAD.search(line)):
        unit, dec = m.group(4), m.group(3) or ""
        st.hints.add("loadgb" if m.group(1).startswith("Loading") else "load_gb" if unit == "GB" else
                     ("load_mem4" if len(dec) > 2 else "load_mem2") if m.group(5) else "load_gib" if unit else "")
        st.put(line, "weights_gib", m.group(2))
        return True
    dump = "config" in line or "args" in line
    for gate, rx, targets, hint in RULES:
        if not (gate in line if isinstance(gate, str) else any(g in line for g in gate)):
            continue
        if (hint == "prof" and dump) or not (m := rx.search(line)):
            continue
        hit = True
        for target, text in zip(targets, m.groups(), strict=False):
            st.put(line, target, text)
        if hint == "prof":
            st.hints.add("prof_one" if "memory=" in line or "size=" in line else "prof_worker" if (
                "takes" in line or "GiB)" in line or "reserved for" in line) else "prof_multi")
        elif hint == "kv":
            st.hints.update(["kv_one" if m.group(3) else "kv_two"] + (["kv_dev"] if m.group(1) != "GPU" else []))
        elif hint == "blocks":
            st.hints.add("blocks_v1" if not m.group(3) else "blocks_v0" if m.group(1) == "GPU" else "blocks_cuda")
        elif hint:
            st.hints.add(hint)
        if gate == "on startup":
            for text, what in USAGE.findall(line):
                st.put(line, USAGE_KEYS[what], text)
            for key, text in zip(("suggested_kv_cache_memory_bytes", "suggested_kv_cache_memory_bytes_full"),
                                 SUGGEST.findall(line), strict=False):
                st.put(line, key, text)
    if "Memory profiling takes" in line:
        st.hints.add("prof_worker")
        hit = True
    return hit or "Memory profiling results" in line


def _errors(st: _State, line: str) -> bool:
    if "raise " in line or 'File "' in line or not any(e in line for e in ERRORS):
        return False
    h = HEADER.search(line, 0, 400)
    msg = line[h.end():] if h else line.lstrip()
    if not h and (p := PREFIX.match(msg)):
        msg = msg[p.end():]
    msg = msg.strip()[:300]
    if msg and msg not in st.seen and len(st.f.errors) < 100:
        st.seen.add(msg)
        st.f.errors.append(msg)
    return True


def _config(st: _State, line: str) -> bool:
    hit = False
    for key in ("with config: ", "non-default args: ", "args: Namespace("):
        i = line.find(key)
        if i < 0:
            continue
        text, parsed = line[i + len(key):], None
        if key.startswith("non"):
            try:
                parsed = ast.literal_eval(text.strip()) if len(text) < 20000 else None
            except Exception:
                parsed = None
            text = text.lstrip()[1:]
        if not isinstance(parsed, dict):
            parsed = _items(text)
        if key.startswith("with") and isinstance(parsed.get("model"), str):
            st.config_model = st.config_model or parsed["model"]
        for k, v in parsed.items():
            if isinstance(k, str) and st.f.args.get(k) is None:
                st.f.args[k] = v
        hit = True
    if ("version" in line or "engine (v" in line) and st.f.version is None:
        for rx in VERSIONS:
            if m := rx.search(line):
                st.f.version = m.group(1)
                return True
    return hit


def _fmt(v: Version) -> str:
    return v.text.removesuffix(".99")  # "0.7.99": every 0.7 release


def _hint(keys: set[str]) -> str | None:
    picked = [HINTS[k] for k in sorted(keys) if k in HINTS]
    if not picked:
        return None
    gen = "/".join(sorted({g for g, *_ in picked if g})) or "V0/V1"
    lo, hi = max(Version(p[1]) for p in picked), min(Version(p[2]) for p in picked)
    what = ", ".join(p[3] for p in picked)
    if lo > hi:
        return f"{gen} (mixed formats: {what})"
    span = f">= {_fmt(lo)}" if hi == Version(LATEST) else _fmt(lo) if _fmt(lo) == _fmt(hi) else f"{_fmt(lo)}–{_fmt(hi)}"
    return f"{gen} {span} ({what})"


def _finish(st: _State) -> LogFacts:
    f, a = st.f, st.f.args
    for cand in (st.config_model, a.get("model_tag"), a.get("model")):
        if isinstance(cand, str) and cand and cand != "...":
            f.model = cand
            break
    for cand in (f.context_len, a.get("max_model_len"), a.get("max_seq_len")):
        if isinstance(cand, int) and not isinstance(cand, bool):
            f.context_len = cand
            break
    mns = a.get("max_num_seqs")
    if isinstance(mns, int) and not isinstance(mns, bool):
        f.max_running_requests = mns
    if f.version is None:
        f.version_hint = _hint(st.hints)
    return f


def parse(lines: Iterable[str]) -> LogFacts:
    """Facts from a vLLM log (any version, any excerpt); never raises on malformed input."""
    st, read, matched = _State(), 0, 0
    try:
        for line in lines:
            read += 1
            if not isinstance(line, str) or len(line) < 12 or "throughput:" in line:
                continue  # periodic stats lines (most of a long log) carry no startup figure
            try:
                st.label = None
                hit = False
                if ("took" in line or "GiB" in line or "memory" in line or "concurrency" in line or "block" in line
                        or "KV cache" in line or "len " in line or "KVCACHE" in line):
                    hit = _rules(st, line)
                if "Error" in line or "memory" in line or "/dev/shm" in line or "stored in KV" in line:
                    hit = _errors(st, line) or hit
                if "onfig" in line or "args" in line or "version" in line:
                    hit = _config(st, line) or hit
                matched += hit
            except Exception:  # a malformed line is skipped, never fatal
                continue
    except Exception:  # a failing iterator ends the log where it failed
        pass
    st.f.lines_read, st.f.lines_matched = read, matched
    try:
        return _finish(st)
    except Exception:
        return st.f
