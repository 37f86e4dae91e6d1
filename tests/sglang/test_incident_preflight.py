"""Issue #10 acceptance: the seeds' incident from the launch command alone (no log), with its error band.

Ground truth, the server's own log lines quoted in ../shared/seeds/: at --mem-fraction-static 0.85 "KV Cache is
allocated. #tokens: 116171"; at 0.88 the seeds' "159K GPU tokens"; at 0.93 "Capture cuda graph end ... mem
usage=3.75 GB. avail mem=0.82 GB" (so about 0.82 + 3.75 = 4.6 GiB before the graphs)."""

from __future__ import annotations

import pytest

from kvplan import check
from kvplan.units import GiB

GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
BASE = ["python", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
        "--trust-remote-code"]


def _check(mfs: str, *extra: str):
    return check([*BASE, "--mem-fraction-static", mfs, *extra], gpu=GPU, host_mem_gib=449, engine_version="0.5.9")


@pytest.mark.parametrize("mfs, logged, within_pct", [("0.85", 116_171, 1.0), ("0.88", 159_000, 2.0)])
def test_kv_tokens_from_the_command_alone(mfs, logged, within_pct):
    r = _check(mfs).plan.per_rank
    assert abs(r.kv_tokens - logged) / logged * 100 <= within_pct, r.kv_tokens
    lo, hi = r.kv_tokens_range
    assert lo <= logged <= hi and lo < r.kv_tokens < hi  # estimated inputs: a band, and it holds the log


def test_093_leaves_under_a_gib_after_the_graphs():
    res = _check("0.93", "--enable-hierarchical-cache", "--hicache-size", "300")
    st = res.plan.per_rank.static
    assert st is not None
    assert abs(st.headroom_after_graphs_bytes / GiB - 0.82) <= 0.3
    assert abs(st.headroom_after_pools_bytes / GiB - (0.82 + 3.75)) <= 0.3
    assert "gpu-headroom-low" in {f.id for f in res.findings}


def test_band_collapses_when_the_log_gives_the_inputs():
    # free memory before weights and the weights per rank as a log states them: nothing estimated is left
    r = check([*BASE, "--mem-fraction-static", "0.85"], gpu=GPU, host_mem_gib=449, engine_version="0.5.9",
              free_gib=93.9, weights_gib=72.17).plan.per_rank
    assert r.kv_tokens_range == (r.kv_tokens, r.kv_tokens)
