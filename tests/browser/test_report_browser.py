"""The HTML reports opened in headless Chromium, offline: the charts render (SVG laid out by the browser), their
legends and numbers are the JSON's, and nothing is fetched. Screenshots: tests/artifacts/*.png."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.diagnose.incident_log import write_incident_log

pytestmark = pytest.mark.slow
GiB = 2**30
GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def open_offline(page, path) -> None:
    page.page.context.set_offline(True)
    try:
        page.page.goto(path.as_uri())
        page.page.wait_for_load_state("load")
    finally:
        page.page.context.set_offline(False)
    assert page.requests == [path.as_uri()], page.requests  # the file itself, nothing else
    assert page.errors == []


def test_check_example_report(tmp_path, page):
    report = tmp_path / "r.html"
    code, _, _ = run_cli(["check", "--example", "--html", str(report)])
    d = json.loads(run_cli(["check", "--example", "--json"])[1])
    assert code == 1 and report.is_file()
    open_offline(page, report)
    pg, r = page.page, d["per_rank"]
    # both charts drawn by the browser: one bar per rank (8) with its segments, one per node
    assert pg.locator("#gpu-chart rect.seg[data-row='0']").count() == 7
    assert pg.locator("#gpu-chart rect.seg").count() == 8 * 7
    assert pg.locator("#host-chart rect.seg").count() == 8 + 1
    box = {k: pg.locator(f"#gpu-chart rect.seg[data-row='0'][data-key='{k}']").bounding_box()
           for k in ("weights", "kv_pool")}
    ratio = box["weights"]["width"] / box["kv_pool"]["width"]
    assert ratio == pytest.approx(r["weights_bytes"] / r["kv_pool_bytes"], rel=0.01)  # widths follow the bytes
    # legends: the JSON's bytes in GiB, 2 decimals, as a reader would compute them
    for key, field in (("weights", "weights_bytes"), ("kv_pool", "kv_pool_bytes"),
                       ("req_to_token", "req_to_token_bytes"), ("cuda_graphs", "cuda_graph_bytes"),
                       ("activations", "headroom_after_graphs_bytes")):
        li = pg.locator(f"#gpu-chart-legend li[data-legend-key='{key}']")
        assert li.inner_text().endswith(f"{r[field] / GiB:.2f} GiB"), key
    n = d["per_node"]
    assert n["host_kv_bytes"] / 1e12 == pytest.approx(2.40, abs=0.005)
    assert n["host_available_bytes"] == 449 * GiB
    text = pg.inner_text("body")
    assert "2.40 TB (2,235 GiB) of host KV against 449 GiB" in text
    assert "node memory available 449 GiB" in pg.text_content("#host-chart")
    over = pg.locator("#host-chart rect.over")
    assert over.count() == 1 and over.get_attribute("fill") == "#d62728"
    assert pg.locator("#gpu-chart line.mark[data-key='static_fraction']").count() == 1
    assert pg.locator("#gpu-chart rect.band").count() == 2
    assert pg.locator(".finding.error[data-finding='host-oversubscribed']").count() == 1
    assert pg.inner_text("#suggested-command") == d["suggested_command"]
    assert pg.inner_text("#verdict") == "FAIL"
    page.shot("check-example.png", full_page=True)
    top = pg.locator("#host-chart-section").bounding_box()
    page.shot("check-example-charts.png", full_page=True,
              clip={"x": 0, "y": 0, "width": 1040, "height": top["y"] + top["height"]})


def test_copy_button_copies_the_suggested_command(tmp_path, page):
    report = tmp_path / "r.html"
    run_cli(["check", "--example", "--html", str(report)])
    page.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.page.goto(report.as_uri())
    page.page.click("button[data-copy='suggested-command']")
    page.page.wait_for_function("document.querySelector(\"button[data-copy='suggested-command']\").textContent "
                                "!== 'copy'")
    got = page.page.evaluate("getSelection().toString()") or page.page.evaluate("navigator.clipboard.readText()")
    assert got.strip() == page.page.inner_text("#suggested-command").strip()


def test_explain_report(tmp_path, page):
    log = write_incident_log(tmp_path / "server.log")
    report = tmp_path / "e.html"
    code, out, err = run_cli(["explain", str(log), "--gpu", GPU, "--html", str(report), "--json"])
    assert code == 0, err
    d = json.loads(out)
    open_offline(page, report)
    pg = page.page
    for c in d["comparisons"]:
        if isinstance(c["observed"], (int, float)):
            bar = pg.locator(f"#explain-chart rect.bar[data-key='{c['field']}:log']")
            assert float(bar.get_attribute("data-value")) == c["observed"]
            assert bar.bounding_box()["width"] > 0
    assert pg.locator("#comparisons tr[data-field='kv_tokens']").inner_text().split("\t")[2] == "116171"
    assert pg.locator("#gpu-chart rect.seg").count() > 0
    page.shot("explain-incident.png", full_page=True)


def test_diagnose_report(tmp_path, page):
    log = write_incident_log(tmp_path / "server.log")
    report = tmp_path / "d.html"
    code, out, err = run_cli(["diagnose", "--log", str(log), "--gpu", GPU, "--engine-version", "0.5.9",
                              "--host-mem-gib", "449", "--html", str(report), "--json"])
    assert code == 0, err
    d = json.loads(out)
    open_offline(page, report)
    pg = page.page
    for key in ("running", "queued", "kv-usage", "gen-tps"):
        line = pg.locator(f"#series-{key} polyline.series")
        assert line.count() == 1 and int(line.get_attribute("data-points")) == len(d["series"])
        assert line.bounding_box()["width"] > 500
    levers = {lv["name"]: lv for lv in d["levers"]}
    for name in ("current", "fraction 0.88"):
        bar = pg.locator(f"#lever-kv-tokens rect.bar[data-key='{name}']")
        assert int(bar.get_attribute("data-value")) == levers[name]["kv_tokens"]
    assert levers["current"]["kv_tokens"] == 116_171  # anchored on the log's pool
    cur = pg.locator("#lever-kv-tokens rect.bar[data-key='current']")
    assert cur.get_attribute("fill") == "#333333" and pg.locator("#lever-kv-tokens line.mark").count() == 1
    assert pg.inner_text("#bottleneck") == "kv-capacity"
    page.shot("diagnose-incident.png", full_page=True)
