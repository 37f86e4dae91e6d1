"""Argument dumps pasted with "..." elisions (how logs reach tickets and the corpora): the items after an elision
are still read."""

from __future__ import annotations

from pathlib import Path

from kvplan.engines.sglang.log import parse as parse_sglang
from kvplan.engines.vllm.log import _items
from kvplan.logs.reader import iter_lines

PREFLIGHT = Path(__file__).resolve().parents[1] / "data" / "preflight" / "raw"


def test_sglang_server_args_after_an_elision():
    # the real log: "server_args=ServerArgs(..., is_embedding=False, ... dtype='auto', ..., kv_cache_dtype='auto',
    # ... mem_fraction_static=0.2, max_running_requests=None, ..., chunked_prefill_size=-1, ..."
    facts = parse_sglang(iter_lines(str(PREFLIGHT / "sglang-sglangsetup-llama32-3b-hicache-48gb.txt")))
    assert facts.args["mem_fraction_static"] == 0.2
    assert facts.args["dtype"] == "auto" and facts.args["chunked_prefill_size"] == -1
    assert facts.args["context_length"] == 35000


def test_vllm_dumps_after_an_elision():
    assert _items("model='m', ..., tensor_parallel_size=2, ... dtype=torch.bfloat16)") == {
        "model": "m", "tensor_parallel_size": 2, "dtype": "torch.bfloat16"}
    assert _items("'model': 'm', ... 'max_model_len': 8192}") == {"model": "m", "max_model_len": 8192}
