"""SGLang startup log -> LogFacts: streams any size, never raises, stdlib only.

Formats known, 0.3 to 0.5.23 (literal examples: ../shared/reference/sglang-memory.md sections 2.5 and 3):
0.3 time-only prefix "[22:30:52 TP0]" and bench_latency's bare "max_total_num_tokens=N"; <=0.4.3 "Load weight end"
without mem usage, "KV Cache is allocated. K size: X GB, V size: Y GB." without #tokens (0.4.1+), "Capture cuda graph
end. Time elapsed: t s", summary without chunked_prefill_size; 0.4.4+ "Load weight end. ..., avail mem=, mem usage=",
"KV Cache is allocated. #tokens: N, K size/V size" or MLA "KV size", "Capture [draft |piecewise ]cuda graph
begin/end", summary (0.4.10+ with available_gpu_mem), "server_args=ServerArgs(...)" (to 0.5.15); 0.5.x "elapsed=",
"Using KV cache dtype:"; 0.5.15+ "KV Cache is allocated. dtype: ..."; 0.5.20+ "server_args={...}", "Capture target
decode CUDA graph", "Allocating kv hierarchical KV host pool: N tokens, X GB host memory."; 0.5.21+ "Memory baseline
taken" (before: "Init torch distributed ends. mem usage="); any 0.4/0.5: "Allocating X GB host memory for
hierarchical KV cache.", "Use sliding window memory pool.", "Mamba Cache is allocated.", "... larger than the
profiled value N", out-of-memory errors. Prefixes "[date time TP0]", "[... DP0 TP3 EP3]", "[ TP0 PP0 file.py:N]" or
none, after any leading garbage (docker, "(pid=N)"); the rank label is the prefix's rank tokens as printed.

Per rank and launch the first figure of each kind wins (a second "Load weight end" or KV pool on a rank is the draft
model's); a second ServerArgs dump after startup lines starts a new launch and only the last is kept. Facts without
a LogFacts field go to ``args`` under "_" keys: _model_class, _draft_weights_gib {rank: GiB}, _graph_extra_gib {rank:
GiB of draft/prefill/piecewise graphs}, _max_prefill_tokens, _available_cpu_mem_gib, _profiled_max_total_num_tokens,
_swa_layer_tokens, _full_layer_tokens, _max_mamba_cache_size, _mamba_conv_state_gib, _mamba_ssm_state_gib,
_host_pools_gb {label: GB}, _host_requested_gb, _host_free_gb, _launches (ServerArgs dumps seen).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from kvplan.logs.facts import LogFacts, RankFacts

_N = r"(-?\d+(?:\.\d+)?)"
_GB = _N + r" ?GB"
_AVAIL, _USAGE = re.compile(r"avail mem=" + _GB), re.compile(r"mem usage=" + _GB)
_TYPE = re.compile(r"\btype=(\w+)")
_KV_DTYPE = re.compile(r"\bdtype: ([\w.]+),")
_TOKENS = re.compile(r"#tokens: (\d+),")
_K, _V, _KV = (re.compile(rf"\b{w} size: " + _GB) for w in ("K", "V", "KV"))
_USING_DTYPE = re.compile(r"Using KV cache dtype: ([\w.]+)")
_SUMMARY = re.compile(r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests|"
                      r"context_len)=(-?\d+)(?=,|\s*$)")
_AVAIL_DEV = re.compile(r"\bavailable_(gpu|cpu)_mem=" + _GB)
_PROFILED = re.compile(r"larger than the profiled value (-?\d+)\b")
_HOST_OLD = re.compile(r"Allocating " + _GB + r" host memory for hierarchical KV cache")
_HOST_NEW = re.compile(r"Allocating (\w+) hierarchical KV host pool: (\d+) tokens, " + _GB + " host memory")
_HOST_ERR = re.compile(r"Requesting " + _GB + r" but only have " + _GB + " free")
_SWA = re.compile(r"full_layer_tokens=(\d+), swa_layer_tokens=(\d+)\b")
_MAMBA = re.compile(r"max_mamba_cache_size: (\d+)\b(?:, conv_state size: " + _GB + r")?(?:, ssm_state size: "
                    + _GB + ")?")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANK = re.compile(r"\b(?:ATTN_CP|MOE_DP|DP|PP|TP|EP|CP)\d+\b")
_TIME_ONLY = re.compile(r"\[\d\d:\d\d:\d\d ")
_PREFIX = re.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d[^\]]* (?:TP|DP|PP)\d+[^\]]*\] ")
_VER = r"v?(\d+\.\d+\.\d+(?:[.-]?(?:post|rc|dev)\d+)*)"
_VERSION = re.compile(r"sglang(?:\[[\w,]*\])?\s*(?:==|-|:|@)\s*" + _VER + r"|\bversion\s*[=:]\s*['\"]?" + _VER, re.I)
_SCAN = re.compile(r"""'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?|[()\[\]{},]""")
# an item; a "... " before it is an excerpt's elision (a pasted log with the dump shortened), not part of the name
_ITEM = re.compile(r"""\s*(?:\.\.\.\s*)?(?:(\w+)\s*=(?!=)|['"](\w+)['"]\s*:)(.*)""", re.S)
_MARKERS = ("Load weight begin. avail mem=", "Load weight end.", "KV Cache is allocated.", "Memory pool end.",
            "max_total_num_tokens=", "server_args=ServerArgs(", "server_args={", "Init torch distributed ",
            "Memory baseline taken", "Capture cuda graph", "CUDA graph begin", "Decode batch", "Prefill batch",
            "for hierarchical KV cache", "hierarchical KV host pool", "The server is fired up and ready to roll")
_ERRORS = ("Not enough host memory available", "CUDA out of memory", "OutOfMemoryError",
           "Please try to increase --mem-fraction-static", "leave no GPU memory for the KV cache",
           "The memory capacity is unbalanced", "RuntimeError:", "ValueError:", "Scheduler hit an exception")
_DRAFT_CLASS = ("Eagle", "NextN", "MTP", "Draft", "Medusa")
MAX_ERRORS, MAX_ERROR_LEN, MAX_VALUE_LEN = 100, 1000, 20000


def looks_like(line: str) -> bool:
    """True for a line only SGLang prints (engine detection)."""
    if not isinstance(line, str):
        return False
    return any(m in line for m in _MARKERS) or (
        "TP" in line and "[" in line and _PREFIX.search(line[:200]) is not None)


def _f(s: str | None) -> float | None:
    try:
        return float(s) if s is not None else None
    except ValueError:
        return None


def _rank(line: str, pos: int) -> str:
    for m in _BRACKET.finditer(line, 0, pos):
        toks = _RANK.findall(m.group(1))
        if toks:
            return " ".join(toks)
    return ""


def _value(raw: str) -> Any:
    raw = raw.strip()
    if raw in ("inf", "-inf", "nan"):
        return float(raw)
    if not raw or len(raw) > MAX_VALUE_LEN or raw[0] == "<":
        raise ValueError(raw[:40])
    return ast.literal_eval(raw)  # literals only: never eval


def parse_server_args(text: str) -> dict[str, Any]:
    """Fields of a ``ServerArgs(k=v, ...)`` or ``{'k': v, ...}`` dump. Unreadable values and the last item of a cut
    dump are skipped; the dict form's nested records are also flattened one level (top-level names win)."""
    out: dict[str, Any] = {}
    is_dict = text.lstrip().startswith("{")
    depth = 0
    item_start = start = text.find("{" if is_dict else "(") + 1

    def item(s: str) -> None:
        m = _ITEM.match(s)
        try:
            if m:
                out[m.group(1) or m.group(2)] = _value(m.group(3))
        except Exception:  # noqa: BLE001 - an unreadable value is skipped
            pass

    for m in _SCAN.finditer(text, start):
        t = m.group()
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                item(text[item_start:m.start()])
                break
        elif t == "," and depth == 0:
            item(text[item_start:m.start()])
            item_start = m.end()
    for v in list(out.values()) if is_dict else ():
        if isinstance(v, dict):
            for k, sub in v.items():
                if isinstance(k, str) and k.isidentifier():
                    out.setdefault(k, sub)
    return out


class _Parser:
    def __init__(self) -> None:
        self.facts, self.launches = LogFacts(engine="sglang"), 0
        self.hints: dict[str, None] = {}  # format markers seen, in order
        self.dirty = False  # startup figures seen since the last ServerArgs dump

    def hint(self, h: str) -> None:
        self.hints.setdefault(h, None)

    def rank(self, line: str, pos: int) -> tuple[str, RankFacts]:
        if _TIME_ONLY.search(line, 0, pos):
            self.hint("0.3.x (timestamp without date)")
        self.dirty, label = True, _rank(line, pos)
        return label, self.facts.rank(label)

    def add_arg(self, key: str, label: str, gib: float | None) -> None:
        d = self.facts.args.setdefault(key, {})
        d[label] = round(d.get(label, 0.0) + (gib or 0.0), 4)

    def feed(self, line: str) -> bool:
        if "batch" in line and ("Decode batch" in line or "Prefill batch" in line):
            self.hint("<0.5.x (Decode batch.)" if "Decode batch." in line else "0.5.x+ (Decode batch,)"
                      if "Decode batch," in line else "")
            return False
        if ("mem" in line or "GB" in line or "tokens" in line or "rror" in line or "dtype" in line
                or "apture" in line or "server_args" in line or "xception" in line or "profiled" in line
                or "mamba" in line):  # cheap reject: every rule below needs one of these words
            for key, fn in _TRIGGERS:
                if key in line and fn(self, line, line.find(key)):
                    return True
            if ("rror" in line or "memory" in line or "xception" in line) and any(e in line for e in _ERRORS):
                return self.error(line)
        if self.facts.version is None and ("sglang" in line or "SGLang" in line) and (
                "version" in line or "==" in line or "sglang-" in line or "sglang:" in line):
            m = _VERSION.search(line)
            if m:
                self.facts.version = m.group(1) or m.group(2)
                return True
        return False

    def error(self, line: str) -> bool:
        f, s = self.facts, line.strip()[:MAX_ERROR_LEN]
        m = _HOST_ERR.search(s)
        if m:
            f.args["_host_requested_gb"], f.args["_host_free_gb"] = _f(m.group(1)), _f(m.group(2))
        if len(f.errors) < MAX_ERRORS and s not in f.errors:
            f.errors.append(s)
        return True

    def server_args(self, line: str, pos: int) -> bool:
        rest = line[pos + 12:]
        if not rest.startswith(("ServerArgs(", "{")):
            return False
        if self.launches and self.dirty:  # a new launch in the same file: keep the last one
            f = self.facts
            self.facts = LogFacts(engine="sglang", version=f.version, lines_read=f.lines_read,
                                  lines_matched=f.lines_matched)
            self.hints.clear()
        self.launches, self.dirty = self.launches + 1, False
        self.hint("<=0.5.15 (ServerArgs(...) dump)" if rest[0] == "S" else "0.5.20+ (server_args={...} dump)")
        args = parse_server_args(rest)
        self.facts.args.update(args, _launches=self.launches)
        if isinstance(args.get("model_path"), str):
            self.facts.model = args["model_path"]
        return True

    def figure(self, line: str, pos: int, rx: re.Pattern[str], attr: str, conv: Any = _f) -> bool:
        """A one-number line: the rank's first value wins."""
        m = rx.search(line, pos)
        if m is None:
            return False
        r = self.rank(line, pos)[1]
        if getattr(r, attr) is None:
            setattr(r, attr, conv(m.group(1)))
        return True

    def load_end(self, line: str, pos: int) -> bool:
        avail, usage, cls = _AVAIL.search(line, pos), _USAGE.search(line, pos), _TYPE.search(line, pos)
        if not (avail or usage):
            return False
        label, r = self.rank(line, pos)
        if not usage:
            self.hint("<=0.4.3 (Load weight end without mem usage)")
        if "elapsed=" in line:
            self.hint("0.5.x+ (Load weight end. elapsed=)")
        name = cls.group(1) if cls else ""
        if r.load_end_avail_gib is not None or r.weights_gib is not None or any(d in name for d in _DRAFT_CLASS):
            if usage:
                self.add_arg("_draft_weights_gib", label, _f(usage.group(1)))
            return True
        if name:
            self.facts.args.setdefault("_model_class", name)
        r.load_end_avail_gib, r.weights_gib = _f(avail and avail.group(1)), _f(usage and usage.group(1))
        return True

    def kv(self, line: str, pos: int) -> bool:
        dt, tok, k, v, kv = (rx.search(line, pos) for rx in (_KV_DTYPE, _TOKENS, _K, _V, _KV))
        if not (tok or k or kv):
            return False
        r = self.rank(line, pos)[1]
        self.hint("0.5.15+ (KV line has dtype:)" if dt else "0.4.4-0.5.14 (KV line has #tokens)" if tok
                  else "0.4.1-0.4.3 (KV line without #tokens)")
        if r.kv_tokens is None and r.k_size_gib is None and r.kv_size_gib is None:  # else a draft pool
            r.kv_dtype = dt.group(1) if dt else r.kv_dtype
            r.kv_tokens = int(tok.group(1)) if tok else None
            r.k_size_gib, r.v_size_gib, r.kv_size_gib = (_f(x and x.group(1)) for x in (k, v, kv))
        return True

    def graph(self, line: str, pos: int) -> bool:
        i = line.find("graph ", pos)
        if i < 0 or not line.startswith(("begin", "end"), i + 6):
            return False
        kind = line[pos + 8:i].strip().lower()  # "cuda", "draft cuda", "target decode cuda", "piecewise cuda" ...
        if "target" in kind:
            self.hint("0.5.10+ (Capture target ... CUDA graph)")
        label, r = self.rank(line, pos)
        avail, usage = _AVAIL.search(line, i), _USAGE.search(line, i)
        if line.startswith("begin", i + 6):
            if r.graph_begin_avail_gib is None:
                r.graph_begin_avail_gib = _f(avail and avail.group(1))
            return True
        if "Time elapsed" in line and not usage:
            self.hint("<=0.4.3 (Capture cuda graph end without mem usage)")
        if avail:
            r.graph_end_avail_gib = _f(avail.group(1))
        if usage and r.graph_mem_gib is None and kind in ("cuda", "target decode cuda", "target verify cuda"):
            r.graph_mem_gib = _f(usage.group(1))
        elif usage:
            self.add_arg("_graph_extra_gib", label, _f(usage.group(1)))
        return True

    def summary(self, line: str, pos: int) -> bool:
        f, found = self.facts, dict(_SUMMARY.findall(line, pos))
        if "max_total_num_tokens" not in found:
            return False
        self.dirty, f.kv_tokens = True, int(found["max_total_num_tokens"])
        for key in ("chunked_prefill_size", "max_running_requests", "context_len"):
            if key in found:
                setattr(f, key, int(found[key]))
        if "max_prefill_tokens" in found:
            f.args["_max_prefill_tokens"] = int(found["max_prefill_tokens"])
        dev = _AVAIL_DEV.search(line, pos)
        if dev and dev.group(1) == "gpu":
            f.available_gpu_mem_gib = _f(dev.group(2))
        elif dev:
            f.args["_available_cpu_mem_gib"] = _f(dev.group(2))
        if len(found) > 1:
            self.hint("0.4.10+ (summary has available_gpu_mem)" if dev else "0.4.4-0.4.9 (summary ends at context_len)"
                      if "chunked_prefill_size" in found else "<=0.4.3 (summary without chunked_prefill_size)")
        return True

    def misc(self, line: str, pos: int) -> bool:
        a, m = self.facts.args, _PROFILED.search(line) or _SWA.search(line, pos) or _MAMBA.search(line, pos)
        if m is None:
            return False
        if m.re is _PROFILED:
            a["_profiled_max_total_num_tokens"] = int(m.group(1))
        elif m.re is _SWA:
            a["_full_layer_tokens"], a["_swa_layer_tokens"] = int(m.group(1)), int(m.group(2))
        else:
            a["_max_mamba_cache_size"] = int(m.group(1))
            a["_mamba_conv_state_gib"], a["_mamba_ssm_state_gib"] = _f(m.group(2)), _f(m.group(3))
        self.dirty = True
        return True

    def host(self, line: str, pos: int) -> bool:
        old, new = _HOST_OLD.search(line, pos), _HOST_NEW.search(line, pos)
        if not (old or new):
            return False
        r, gb = self.rank(line, pos)[1], _f(old.group(1) if old else new.group(3) if new else None)
        r.host_pool_gb = round((r.host_pool_gb or 0.0) + (gb or 0.0), 4)  # every host pool of the rank
        if new:
            self.hint("0.5.20+ (hierarchical KV host pool line)")
            self.facts.args.setdefault("_host_pools_gb", {})[new.group(1)] = gb
            if new.group(1) == "kv":
                r.host_pool_tokens = int(new.group(2))
        return True


def _fig(rx: re.Pattern[str], attr: str, conv: Any = _f) -> Any:
    return lambda p, line, pos: p.figure(line, pos, rx, attr, conv)


def _dist(p: _Parser, line: str, pos: int) -> bool:
    p.hint("0.5.21+ (Memory baseline taken)")
    return p.figure(line, pos, _USAGE, "dist_init_mem_gib")


_TRIGGERS = (
    ("server_args=", _Parser.server_args), ("Load weight end", _Parser.load_end),
    ("Load weight begin", _fig(_AVAIL, "load_begin_avail_gib")), ("KV Cache is allocated", _Parser.kv),
    ("Memory pool end", _fig(_AVAIL, "pool_end_avail_gib")), ("Capture ", _Parser.graph),
    ("max_total_num_tokens=", _Parser.summary), ("Init torch distributed ends", _fig(_USAGE, "dist_init_mem_gib")),
    ("Memory baseline taken", _dist), ("Using KV cache dtype", _fig(_USING_DTYPE, "kv_dtype", str)),
    ("Allocating ", _Parser.host), ("profiled value", _Parser.misc), ("full_layer_tokens=", _Parser.misc),
    ("max_mamba_cache_size", _Parser.misc),
)


def parse(lines: Iterable[str]) -> LogFacts:
    """Facts of an SGLang log (lines without ANSI codes, as reader.iter_lines gives them). Never raises."""
    p = _Parser()
    try:
        for line in lines:
            p.facts.lines_read += 1
            try:
                if not isinstance(line, str):
                    line = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
                if p.feed(line):
                    p.facts.lines_matched += 1
            except Exception:  # noqa: BLE001 - a line no rule foresaw is skipped, never fatal
                pass
    except Exception:  # noqa: BLE001 - a failing iterator ends the log
        pass
    p.facts.version_hint = "; ".join(h for h in p.hints if h) or None
    return p.facts
