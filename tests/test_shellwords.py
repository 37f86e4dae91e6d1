"""The linear tokenizer (kvplan.shellwords, issue #22) against the reference, ``shlex``: the same words on a corpus of
real launch commands and scripts and on random text over the characters that matter, the same errors; and time
linear in the input (as a ratio between two sizes in the same run; absolute seconds are for benchmarks/)."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import shellwords

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "logcorpus" / "cases.jsonl"


def _corpus() -> list[str]:
    out = []
    for f in (DATA / "preflight" / "cases.jsonl", SHARED):
        if f.is_file():
            out += [json.loads(x).get("command") or "" for x in f.read_text().splitlines() if x.strip()]
    for f in sorted((DATA / "deploy").glob("*.sh")):
        out += f.read_text().replace("\\\n", " ").splitlines()
    out += [  # quoting as launch commands and scripts write it
        "python3 -m sglang.launch_server --model-path 'Qwen/Qwen3-8B' --tp 8",
        'vllm serve "meta-llama/Llama-3.1-8B" --kv-transfer-config \'{"kv_connector":"LMCacheConnectorV1"}\'',
        'vllm serve m --kv-transfer-config "{\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}"',
        "bash -c 'python3 -m sglang.launch_server --model-path $MODEL --port ${PORT:-30000}'",
        'sh -c "exec vllm serve \\"$MODEL\\" --host 0.0.0.0"',
        "VLLM_CPU_KVCACHE_SPACE=4 HF_TOKEN='' vllm serve m",
        "a\\ b c\\\\d 'e'\"f\" \"\" '' \"a\\$b\\`c\\n\"",
        "--served-model-name=my\\ model --chat-template='{% for m in messages %}{{m}}{% endfor %}'",
        "echo 'it''s' \"x\"'y'z",
        "\t  leading  and trailing\t ",
    ]
    return [c for c in out if c]


CORPUS = _corpus()


def _shlex_ops(text: str, comments: bool) -> list[str]:
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#" if comments else ""
    return list(lex)


def _same(text: str, comments: bool = False) -> None:
    try:
        want: object = shlex.split(text, comments=comments)
    except ValueError as e:
        want = ("error", str(e))
    try:
        got: object = shellwords.split(text, comments=comments)
    except ValueError as e:
        got = ("error", str(e))
    assert got == want, text
    try:
        want_ops: object = _shlex_ops(text, comments)
    except ValueError as e:
        want_ops = ("error", str(e))
    try:
        got_ops: object = [w for w, _ in shellwords.tokens(text, operators=True, comments=comments)]
    except ValueError as e:
        got_ops = ("error", str(e))
    assert got_ops == want_ops, text


def test_corpus_matches_shlex():
    assert len(CORPUS) > 40
    for text in CORPUS:
        _same(text)
        if "#" not in text.replace(" #", "").replace("\n#", ""):  # comments only where a word starts (see below)
            _same(text, comments=True)


ALPHABET = st.sampled_from(list("ab -=/.$\\'\"\n\t;&|#") + ["\\\n", "''", '""', "&&", "||"])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_random_text_matches_shlex(text):
    _same(text)
    if "#" not in text:
        _same(text, comments=True)


def test_comments_start_only_where_a_word_can():
    # shlex also cuts a word at '#' (a#b -> a); a shell, and kvplan, keep the word
    assert shellwords.split("vllm serve m # the model", comments=True) == ["vllm", "serve", "m"]
    assert shellwords.split("--served-model-name a#b", comments=True) == ["--served-model-name", "a#b"]
    assert shlex.split("--served-model-name a#b", comments=True) == ["--served-model-name", "a"]
    assert shellwords.split("a '#b' \"#c\" \\#d", comments=True) == ["a", "#b", "#c", "#d"]


@pytest.mark.parametrize("text, why", [("'abc", "No closing quotation"), ('"ab\\"', "No closing quotation"),
                                       ("abc\\", "No escaped character"), ('"abc\\', "No escaped character")])
def test_errors_match_shlex(text, why):
    with pytest.raises(ValueError, match=why):
        shlex.split(text)
    with pytest.raises(ValueError, match=why):
        shellwords.split(text)


def _seconds(fn) -> float:
    t0 = time.process_time()  # CPU time: a loaded machine does not move the ratio
    fn()
    return time.process_time() - t0


@pytest.mark.parametrize("make", [lambda n: "docker run img --name " + "a" * n,
                                  lambda n: '"' + "a\\\"" * (n // 3) + '"',
                                  lambda n: "'" + "x" * n + "'",
                                  lambda n: "a " * (n // 2),
                                  lambda n: "a;" * (n // 2)])
def test_time_is_linear_in_the_input(make):
    small, big = make(150_000), make(1_500_000)
    t_small = min(_seconds(lambda: list(shellwords.tokens(small, operators=True))) for _ in range(3))
    t_big = min(_seconds(lambda: list(shellwords.tokens(big, operators=True))) for _ in range(3))
    # 10x the input: ~10x the time (shlex: ~100x for one long token); generous for a loaded 2-core machine
    assert t_big < 30 * t_small + 0.05, (t_small, t_big)
