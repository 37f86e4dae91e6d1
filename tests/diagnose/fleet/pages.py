"""/metrics pages of a server in a steady state, as functions of the scrape time (for the fake Prometheus and the
fake engine endpoints alike): vLLM 0.32's names and labels (``model_name``, ``engine``; ``cache_config_info``
labels), and the recorded SGLang pages replayed one per scrape."""

from __future__ import annotations

from collections.abc import Callable

from tests.diagnose.fleet.exporters import Replay, recorded_pages


def vllm_page(model: str, running: float, waiting: float, usage: float, gen_tps: float, prompt_tps: float,
              cc: dict[str, str], engines: int = 1, t0: float = 0.0, wobble: bool = True
              ) -> Callable[[float], str]:
    """A vLLM server: per engine (DP) ``running/engines`` running, ``waiting/engines`` waiting, ``usage`` of its
    pool, counters growing at ``gen_tps`` / ``prompt_tps`` (summed over engines). ``wobble``: running alternates
    ±1 between scrapes (a real server's gauge moves)."""
    def page(t: float) -> str:
        k = round(t - t0)
        out = []
        for e in range(engines):
            lab = f'engine="{e}",model_name="{model}"'
            info = ",".join(f'{key}="{v}"' for key, v in {**cc, "engine": str(e)}.items())
            r = running / engines + ((k % 2) - 0.5) * 2 * (wobble and running >= 2 and e == 0)
            out += [f"vllm:cache_config_info{{{info}}} 1.0",
                    f"vllm:num_requests_running{{{lab}}} {r}",
                    f"vllm:num_requests_waiting{{{lab}}} {waiting / engines}",
                    f"vllm:kv_cache_usage_perc{{{lab}}} {usage}",
                    f"vllm:num_preemptions_total{{{lab}}} 0.0",
                    f"vllm:generation_tokens_total{{{lab}}} {gen_tps / engines * (t - t0) + 1e5:.3f}",
                    f"vllm:prompt_tokens_total{{{lab}}} {prompt_tps / engines * (t - t0) + 2e5:.3f}",
                    f"vllm:prefix_cache_queries_total{{{lab}}} {prompt_tps / engines * (t - t0):.3f}",
                    f"vllm:prefix_cache_hits_total{{{lab}}} 0.0"]
        return "\n".join(out) + "\n"
    return page


def sglang_recorded(t0: float = 0.0) -> Callable[[float], str]:
    """The recorded SGLang pages (one per second), page i at t0 + i seconds: a scrape every 15 s reads every
    15th page, its counters grown by 15 seconds' worth."""
    replay = Replay(recorded_pages())
    return lambda t: replay.page(max(0, round(t - t0)))


KV_CC = {"block_size": "16", "cache_dtype": "auto", "gpu_memory_utilization": "0.9", "kv_cache_size_tokens": "8192",
         "num_gpu_blocks": "512"}
