"""Rich tables for people. Every row names its scope (per rank / per node / per replica) and unit."""

from __future__ import annotations

from typing import Any

from kvplan.result import CheckResult
from kvplan.units import GB, GiB

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
VERDICT_STYLE = {"fail": "bold white on red", "warn": "bold black on yellow", "ok": "bold white on green"}


def _gib(n: int) -> str:
    return f"{n / GiB:,.2f} GiB"


def _host(n: int) -> str:
    return f"{n / GB:,.1f} GB ({n / GiB:,.1f} GiB)" if n < 1e12 else f"{n / 1e12:,.2f} TB ({n / GiB:,.0f} GiB)"


def _sglang_rows(p) -> list[tuple[str, str, str]]:
    from kvplan.engines.sglang.settings import sglang_settings

    r, s, pool = p.per_rank, sglang_settings(p), p.per_rank.static
    rows = [("free before weights (P)", _gib(pool.baseline_free_bytes), "engine baseline after dist init"),
            ("weights", _gib(r.weights_bytes), "per rank")]
    rows.append(("mem_fraction_static", f"{pool.mem_fraction_static:g}", str(s.mem_fraction_static_source)))
    mla = " · MLA replicated per rank" if p.model.is_mla else ""
    rows += [("KV bytes per token", f"{r.kv_bytes_per_token:,} B", f"{s.kv_cache_dtype}, "
              f"{s.kv_heads_per_rank} KV head(s)/rank, {s.layers_per_rank} layers{mla}"),
             ("KV tokens", f"{r.kv_tokens:,}", f"page size {s.page_size}")]
    if r.swa_tokens is not None:
        rows.append(("SWA tokens", f"{r.swa_tokens:,}", "sliding-window pool"))
    if r.mamba_slots is not None:
        rows.append(("Mamba state slots", f"{r.mamba_slots:,}", "requests with recurrent state"))
    rows += [("KV pool", _gib(r.kv_pool_bytes), "on the GPU, incl. one spare page"),
             ("max running requests", f"{r.max_running_requests:,}", "per DP worker"),
             ("outside the static pool", _gib(pool.headroom_bytes), "P × (1 − fraction)"),
             ("  req_to_token table", _gib(pool.req_to_token_bytes), f"{s.req_to_token_slots} slots × context"),
             ("  CUDA graphs", _gib(pool.cuda_graph_bytes), "estimate"),
             ("  left after graphs", _gib(pool.headroom_after_graphs_bytes), "for prefill activations")]
    if r.host_kv_bytes:
        pinned = f", pins {_host(r.host_kv_pinned_bytes)}" if r.host_kv_pinned_bytes != r.host_kv_bytes else ""
        rows.append(("host KV pool (HiCache)", _host(r.host_kv_bytes),
                     f"{r.host_kv_tokens:,} tokens, {s.hicache.sizing}{pinned}"))
    return rows


def _vllm_rows(p) -> list[tuple[str, str, str]]:
    from kvplan.engines.vllm.settings import vllm_settings

    r, s, rep = p.per_rank, vllm_settings(p), p.per_replica
    rows = [("weights", _gib(r.weights_bytes), "per rank"),
            ("KV cache memory", _gib(s.kv_budget_bytes_per_rank), str(s.kv_budget_source)),
            ("block size", f"{s.block_size}", str(s.block_size_source)),
            ("bytes per block", f"{s.bytes_per_block:,} B", f"{s.kv_cache_groups} KV-cache group(s), "
             f"{s.kv_cache_dtype}, {s.kv_heads_per_rank} KV head(s)/rank"
             + (" · MLA replicated per rank" if p.model.is_mla else "")),
            ("KV blocks", f"{r.kv_blocks:,}", "per rank (= per engine: the minimum across ranks), incl. null block"),
            ("KV cache size (tokens)", f"{rep.kv_tokens:,}", "as vLLM logs it"),
            ("maximum concurrency", f"{rep.max_concurrency:.2f}x", f"requests of max_model_len {s.max_model_len:,}"),
            ("max_num_seqs / batched tokens", f"{s.max_num_seqs} / {s.max_num_batched_tokens}", "scheduler")]
    for t in s.host_tiers:
        each = max(t.per_rank_bytes) if t.per_rank_bytes else 0
        rows.append((f"host: {t.flag}", _host(each), f"{t.meaning}; pinned node total {_host(t.node_bytes)}"))
    return rows


def render(result: CheckResult, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    p, n, rep, s = result.plan, result.plan.per_node, result.plan.per_replica, result.plan.settings
    c = p.cluster
    con.print(f"[bold]kvplan check[/] · {p.engine} {p.engine_version} [dim]({p.version_source})[/] · "
              f"{p.model.name} [dim]({p.model.architecture}, {p.model.attention})[/]")
    con.print(f"[dim]{c.gpu} · {c.gpu_mem_mib:,} MiB per GPU ({c.gpu_source}) · "
              f"{c.gpus_per_node} GPUs per node × {c.nodes} node(s) · host {c.host_mem_gib:,} GiB "
              f"({c.host_mem_source})[/]")

    t = Table(title=f"Per rank (each of {s.world_size} ranks)", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_column("how", style="dim")
    for row in (_vllm_rows(p) if p.engine == "vllm" else _sglang_rows(p)):
        t.add_row(*row)
    con.print(t)

    t = Table(title="Per node", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("GPU ranks of this launch", f"{n.ranks}")
    if n.host_kv_bytes:
        over = n.host_kv_bytes > n.host_available_bytes - n.host_reserve_bytes
        style = "bold red" if over else ""
        t.add_row("host KV requested (all ranks)", f"[{style}]{_host(n.host_kv_bytes)}[/]" if style else
                  _host(n.host_kv_bytes))
        t.add_row("host memory available", _host(n.host_available_bytes))
        t.add_row("engine host reserve", _gib(n.host_reserve_bytes))
    if n.shm_bytes is not None and p.cluster.host_mem_source.startswith("detected"):
        t.add_row("/dev/shm (this machine)", _gib(n.shm_bytes))
    con.print(t)

    t = Table(title="Per replica", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("GPU ranks / DP attention groups", f"{rep.ranks} / {rep.dp_groups}")
    t.add_row("distinct KV tokens on GPU", f"{rep.kv_tokens:,}")
    t.add_row(f"requests of {rep.avg_tokens:,} tokens that fit at once", f"{rep.requests_fit:,}")
    if rep.replicas > 1:
        t.add_row("replicas in this launch (--dp)", f"{rep.replicas}")
    con.print(t)

    for f in result.findings:
        con.print(f"[{SEV_STYLE[f.severity]}]{f.severity.upper():7}[/] [bold]{f.id}[/]: {f.message}")
        con.print(f"         [green]fix:[/] {f.fix}")
    if result.suggested_command:
        con.print("\n[bold]suggested command[/]")
        con.print(result.suggested_command, soft_wrap=True, highlight=False)
        sp = result.suggested_plan
        if sp is not None:
            con.print(f"[dim]→ {sp.per_rank.kv_tokens:,} KV tokens per rank; host KV "
                      f"{_host(sp.per_node.host_kv_bytes)} per node[/]")
    for a in p.assumptions:
        con.print(f"[dim]· {a}[/]")
    con.print(f"verdict: [{VERDICT_STYLE[result.verdict]}] {result.verdict.upper()} [/]")
