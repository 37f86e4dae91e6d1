"""toyllm: a minimal, complete engine package for kvplan (docs/DEVELOPERS.md, "Adding an engine"). Registered at
test time only
(``kvplan.engines.register("toyllm", "tests.fake_engine.engine:ENGINE")``); it plans, explains its logs and is
diagnosed from them through the same public paths as SGLang and vLLM.

Its launch: ``toyllm serve MODEL [--kv-gib G] [--block-size B] [--max-seqs N] [--tp N] [--port P]``; its KV pool is
exactly ``--kv-gib`` GiB per rank in bf16 blocks of ``--block-size`` tokens. Its log (args.py documents the lines):
"toyllm 1.2.0 starting", "toyllm args: model=M kv_gib=G block_size=B", "toyllm kv pool: N tokens",
"toyllm stats: running=R waiting=W usage=U gen_tps=T".
"""
