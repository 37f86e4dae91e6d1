"""The ``kvplan serve`` page in headless Chromium against the real CLI server: it plans the incident on load, a
user moving the fraction slider from 0.85 to 0.88 (arrow keys) sees the KV tokens change to what ``kvplan check``
says for that command, and bad input shows the CLI's one-line error. Screenshots: tests/artifacts/serve-*.png."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.conftest import INCIDENT_HW, run_cli
from tests.waits import readline

pytestmark = pytest.mark.slow
CELL = (512 + 64) * 61 * 2  # Kimi-K2.5 MLA: (kv_lora_rank + rope dim) x 61 layers x 2 B, one copy per rank


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    p = subprocess.Popen([sys.executable, "-m", "kvplan", "serve", "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = readline(p.stdout, 120)
        assert line.startswith("kvplan serve: http://127.0.0.1:"), line
        yield line.split()[2]
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def check_json(command: str) -> dict:
    code, out, err = run_cli(["check", *INCIDENT_HW, "--json", "--", *shlex.split(command)])
    assert out, err
    return json.loads(out)


def wait_planned(pg, fraction: str) -> dict:
    pg.wait_for_selector(f"#kv-tokens[data-planned-fraction='{fraction}']", timeout=30_000)
    pg.wait_for_selector("body[data-state=ready]")
    return {"kv_tokens": int(pg.get_attribute("#kv-tokens", "data-value")), "shown": pg.inner_text("#kv-tokens"),
            "command": pg.inner_text("#effective-command"),
            "mark": int(pg.get_attribute("#gpu-chart line.mark[data-key='static_fraction']", "data-bytes"))}


def test_fraction_slider_redraws_the_plan(server, page):
    pg = page.page
    pg.goto(server)
    first = wait_planned(pg, "0.93")  # the page opens on the incident (fraction 0.93 in its command)
    assert first["kv_tokens"] == check_json(first["command"])["per_rank"]["kv_tokens"]
    assert "2.40 TB (2,235 GiB)" in pg.inner_text("#host-chart-section")
    slider = pg.locator("#fraction")
    slider.evaluate("el => { el.value = '0.85'; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    before = wait_planned(pg, "0.85")
    page.shot("serve-0.85.png", full_page=True)
    slider.focus()
    for _ in range(3):  # as a user does it: three steps of 0.01
        pg.keyboard.press("ArrowRight")
    after = wait_planned(pg, "0.88")
    page.shot("serve-0.88.png", full_page=True)
    assert pg.inner_text("#fraction-out") == "0.88"
    assert "--mem-fraction-static 0.85" in before["command"] and "--mem-fraction-static 0.88" in after["command"]
    for seen in (before, after):  # what the page shows is what kvplan check prints for that command
        assert seen["kv_tokens"] == check_json(seen["command"])["per_rank"]["kv_tokens"]
        assert seen["shown"] == f"{seen['kv_tokens']:,}"
    # 3 % more of the free memory P at 70,272 B per token
    p = check_json(after["command"])["per_rank"]["baseline_free_bytes"]
    assert abs(after["kv_tokens"] - before["kv_tokens"] - 0.03 * p / CELL) <= 2
    assert after["mark"] - before["mark"] == int(p * 0.88) - int(p * 0.85)  # the chart's fraction mark moved
    (ARTIFACTS / "serve-fraction.json").write_text(json.dumps({"0.85": before, "0.88": after}, indent=2))
    assert page.errors == []
    origin = server.rstrip("/")
    assert all(u.startswith(origin) or u.startswith("data:") for u in page.requests), page.requests


def test_bad_input_shows_the_one_line_error(server, page):
    pg = page.page
    pg.goto(server)
    pg.wait_for_selector("body[data-state=ready]")
    # 1.5 passes SGLang's argparse (type=float) but no fraction is above 1: the CLI's one-line error (exit 2). A value
    # argparse itself refuses ("x") is a flag-bad-value finding instead, planned like check (test_serve_api.py).
    pg.fill("#command", "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --mem-fraction-static 1.5")
    pg.wait_for_selector("body[data-state=error]", timeout=30_000)
    code, _, err = run_cli(["check", *INCIDENT_HW, "--", "python", "-m", "sglang.launch_server", "--model-path",
                            "moonshotai/Kimi-K2.5", "--mem-fraction-static", "1.5"])
    assert code == 2
    assert pg.inner_text("#error") == err.strip()  # "kvplan: error: --mem-fraction-static 1.5 is out of range ..."
    page.shot("serve-error.png")
    pg.fill("#command", "python -m sglang.launch_server --model-path Qwen/Qwen3-8B")
    pg.wait_for_selector("body[data-state=ready]", timeout=30_000)
    assert pg.inner_text("#error") == ""
