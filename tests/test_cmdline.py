"""Launch commands as users type them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engines import detect_engine, split_command
from kvplan.engines.cmdline import rewrite_flags
from kvplan.engines.sglang.args import FLAGS, parse_sglang


def test_env_prefix_equals_and_abbreviations():
    cmd = split_command("CUDA_VISIBLE_DEVICES=0,1 SGLANG_X=1 python3 -m sglang.launch_server "
                        "--model=Qwen/Qwen3-8B --tp=2 --mem-frac 0.8 --enable-hicache --hicache-size=20 "
                        "--some-new-flag value --another-new-flag")
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_X": "1"}
    assert detect_engine(cmd).name == "sglang"
    a = parse_sglang(cmd)
    assert (a.model_path, a.tp_size, a.mem_fraction_static) == ("Qwen/Qwen3-8B", 2, 0.8)
    assert a.enable_hierarchical_cache and a.hicache_size == 20.0
    assert a.unknown_flags == ("--some-new-flag", "--another-new-flag")


def test_sglang_serve_and_line_continuations():
    cmd = split_command(["sglang", "serve", "--model-path", "m", "\\", "--tp", "4"])
    assert detect_engine(cmd).name == "sglang" and parse_sglang(cmd).tp_size == 4


def test_rewrite_keeps_everything_else():
    cmd = split_command("FOO=1 python -m sglang.launch_server --model-path m --hicache-size=300 --tp 8 --x y")
    out = rewrite_flags(cmd, {"--hicache-size": "48", "--mem-fraction-static": "0.88", "--hicache-ratio": None},
                        FLAGS)
    assert out == ["FOO=1", "python", "-m", "sglang.launch_server", "--model-path", "m", "--hicache-size=48",
                   "--tp", "8", "--x", "y", "--mem-fraction-static", "0.88"]
    out = rewrite_flags(split_command("python -m sglang.launch_server --tp 8 --enable-hicache"),
                        {"--enable-hierarchical-cache": None}, FLAGS)
    assert out == ["python", "-m", "sglang.launch_server", "--tp", "8"]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t\r\n\x0b\x0c\x1c\x85\xa0\u2028ab=-#$;|&()<>*?~.\x00é1", max_size=24))
def test_tokenize_without_quotes_is_shlex(text):
    """The tokenizer's fast path (no quote, no backslash: a split on shlex's whitespace) is shlex.split."""
    import shlex

    from kvplan.engines.cmdline import tokenize
    from kvplan.errors import KvplanError

    if "\x00" in text:  # no argv holds a NUL (execve ends each string there): refused in one line, never split
        with pytest.raises(KvplanError, match="NUL"):
            tokenize(text)
        return
    assert tokenize(text) == [t for t in shlex.split(text) if t not in ("\\", "\\\n", "") and t.strip() != "\\"]


def test_list_flags_take_every_word_up_to_the_next_flag():
    # argparse nargs="*" (SGLang --lora-paths, --lora-target-modules; vLLM --lora-modules)
    from kvplan.engines.cmdline import Flag, parse_flags, rewrite_flags, split_command

    flags = (Flag("--lora-paths", "list"), Flag("--tp", "int"))
    p = parse_flags(["--lora-paths", "a=/x", "b=/y", "--tp", "2", "--lora-paths=c"], flags)
    assert p.values == {"lora_paths": ("c",), "tp": 2}
    p = parse_flags(["--lora-paths", "a=/x", "b=/y", "--tp", "2"], flags)
    assert p.values == {"lora_paths": ("a=/x", "b=/y"), "tp": 2} and not p.positionals
    cmd = split_command(["python", "-m", "sglang.launch_server", "--lora-paths", "a=/x", "b=/y", "--tp", "2"])
    assert rewrite_flags(cmd, {"--lora-paths": None}, flags)[3:] == ["--tp", "2"]
