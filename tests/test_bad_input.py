"""Bad input gets one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

SGL = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]


def _assert_clean_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines, "no error message"
    text = err.lower()
    for w in words:
        assert w.lower() in text, (w, err)


def test_missing_config_file(tmp_path):
    code, out, err = run_cli(["check", "--gpu", "h100", "--model-config", str(tmp_path / "nope.json"), "--", *SGL])
    _assert_clean_error(code, out, err, "config.json")


def test_malformed_config(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,')
    code, out, err = run_cli(["check", "--gpu", "h100", "--model-config", str(p), "--", *SGL])
    _assert_clean_error(code, out, err, "malformed JSON", "line")


def test_binary_config(tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(b"\xff\xfe\x00\x01garbage")
    code, out, err = run_cli(["check", "--gpu", "h100", "--model-config", str(p), "--", *SGL])
    _assert_clean_error(code, out, err)


def test_unsupported_architecture(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"architectures": ["MyFancyForCausalLM"], "num_hidden_layers": 2}')
    code, out, err = run_cli(["check", "--gpu", "h100", "--model-config", str(p), "--", *SGL])
    _assert_clean_error(code, out, err, "unsupported architecture", "MyFancyForCausalLM")


def test_unknown_gpu():
    code, out, err = run_cli(["check", "--gpu", "NVIDIA Imaginary 9000", "--", *SGL])
    _assert_clean_error(code, out, err, "unknown GPU", "--gpu-mem-mib")


def test_not_an_engine_command():
    code, out, err = run_cli(["check", "--gpu", "h100", "--", "python", "train.py", "--lr", "3e-4"])
    _assert_clean_error(code, out, err, "not a known engine")


def test_unknown_model_says_what_to_pass():
    code, out, err = run_cli(["check", "--gpu", "h100", "--", "python", "-m", "sglang.launch_server",
                              "--model-path", "someone/never-heard-of-it"])
    _assert_clean_error(code, out, err, "--model-config")


@pytest.mark.parametrize("flags, word", [
    (["--tp", "-3"], "--tp-size"),
    (["--mem-fraction-static", "1.5"], "mem-fraction-static"),
    (["--hicache-size", "-1"], "hicache-size"),
])
def test_nonsense_numbers_in_command(flags, word):
    code, out, err = run_cli(["check", "--gpu", "h100", "--host-mem-gib", "100", "--", *SGL, *flags])
    _assert_clean_error(code, out, err, word)


@pytest.mark.parametrize("flags, words", [(["--mem-fraction-static", "abc"], ["invalid float value"]),
                                          (["--tp"], ["--tp", "expects a value"])])
def test_values_the_engine_argparse_refuses_are_findings(flags, words):
    # the engine's own argparse exits on these (issue #13): verdict fail (exit 1) with flag-bad-value, no traceback
    code, out, err = run_cli(["check", "--gpu", "h100", "--host-mem-gib", "100", "--engine-version", "0.5.9",
                              "--json", "--", *SGL, *flags])
    assert code == 1 and "Traceback" not in err and "flag-bad-value" in out
    assert all(w in out for w in words), out


@pytest.mark.parametrize("opts", [["--gpu-mem-mib", "-5"], ["--host-mem-gib", "0"], ["--avg-tokens", "0"],
                                  ["--engine-version", "banana"], ["--engine-version", "9.9.9"],
                                  ["--weights-gib", "-2"]])
def test_nonsense_options(opts):
    code, out, err = run_cli(["check", "--gpu", "h100", "--host-mem-gib", "100", *opts, "--", *SGL])
    if "--gpu-mem-mib" in opts:
        code, out, err = run_cli(["check", "--host-mem-gib", "100", *opts, "--", *SGL])
    _assert_clean_error(code, out, err)


def test_no_command_is_usage_error():
    code, out, err = run_cli(["check", "--gpu", "h100"])
    assert code == 2 and "Traceback" not in err and "--" in err


@pytest.mark.parametrize("value", ["", "4.5", "four"])
def test_vllm_cpu_kvcache_space_the_engine_cannot_read(value):
    # vLLM reads it with int(os.getenv("VLLM_CPU_KVCACHE_SPACE")) (vllm/envs.py, 0.32.0): "" and "4.5" stop the engine
    # at start ("invalid literal for int()"), so kvplan refuses them in one line rather than planning a launch
    code, out, err = run_cli(["check", "--", f"VLLM_CPU_KVCACHE_SPACE={value}", "vllm", "serve", "Qwen/Qwen3-8B"])
    assert code == 2 and "int()" in err and len(err.strip().splitlines()) <= 2, err
