"""What ``kvplan launch`` and ``kvplan cleanup`` need to know of an SGLang launch: its startup phases as its log
shows them (0.4.6-0.5.23, reference/sglang-memory.md sections 3.1 and 2.5), the lines only SGLang prints, the
titles of its processes and the /dev/shm names it (or its HiCache storage backend) leaves."""

from __future__ import annotations

# (phase, regex) in SGLang's startup order; phase names as in kvplan.launch.phases.PHASES
PHASES: tuple[tuple[str, str], ...] = (
    ("dist_init", r"Init torch distributed (?:begin|ends)|Memory baseline taken"),
    ("weights", r"Load weight begin|Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading shards"),
    ("kv_pool", r"Load weight end|KV Cache is allocated|Memory pool end|Mamba Cache is allocated|"
                r"Use sliding window memory pool|SWAKVPool mem usage"),
    ("cuda_graphs", r"Capture (?:[\w-]+ )*(?:cuda|CUDA) graph begin|Capturing batches"),
    ("host_pool", r"host memory for hierarchical KV cache|hierarchical KV host pool"),
    ("ready", r"The server is fired up and ready to roll"),
)
SIGNATURE = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^\]]*)?\] |sglang"  # a line only SGLang prints
PROCESS_TITLES = ("sglang::",)  # setproctitle of its scheduler / detokenizer processes
SHM_PREFIXES = ("sglang", "mooncake")  # its segments and the Mooncake store's (HiCache L3 / PD transfer)
# a log line that starts a new launch (its serving stats restart)
LAUNCH_MARKERS = ("server_args=",)
