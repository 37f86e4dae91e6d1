"""``--html FILE`` on check, plan, explain and diagnose: one self-contained file, the JSON it was drawn from embedded,
the same exit codes, one-line errors (no jinja2, unwritable file)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import INCIDENT_CMD, INCIDENT_HW, run_cli
from tests.diagnose.incident_log import write_incident_log

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", re.I)


def embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="kvplan-data">(.*?)</script>', html, re.S)
    assert m, "the report embeds its JSON"
    return json.loads(m.group(1))


def assert_self_contained(html: str) -> None:
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert not EXTERNAL.search(html), "no src/href to a file or the network"
    assert "<link" not in html and "@import" not in html and "url(http" not in html
    assert "default-src 'none'" in html  # the CSP forbids any load even if a browser tried


def test_check_example_html(tmp_path):
    out = tmp_path / "r.html"
    code, stdout, err = run_cli(["check", "--example", "--html", str(out)])
    assert code == 1  # the incident fails, with or without --html
    assert "host-oversubscribed" in stdout and f"HTML report written to {out}" in err
    html = out.read_text()
    assert_self_contained(html)
    assert len(html.encode()) < 150_000
    code, js, _ = run_cli(["check", "--example", "--json"])
    assert embedded(html) == json.loads(js)
    for needle in ('id="gpu-chart"', 'id="host-chart"', "2.40 TB (2,235 GiB)", "node memory available 449 GiB",
                   "oversubscribed by 1.93 TB", "mem_fraction_static 0.93", 'id="suggested-command"',
                   "--hicache-size 47"):
        assert needle in html, needle
    # 8 ranks × 7 GPU segments; 8 host pools + the OS reserve; the host ledger's bars: loading (frontend,
    # detokenizer, scheduler processes, the TP group's /dev/shm queue) and steady (the same + the HiCache pools; NCCL
    # is 0 on a P2P PCIe card)
    assert html.count('class="seg"') == 8 * 7 + 9 + 4 + 5
    assert 'id="ledger-chart"' in html and "pinning 2.40 TB (2,235 GiB): about 40.0 min" in html


def test_json_and_html_together(tmp_path):
    out = tmp_path / "r.html"
    code, stdout, _ = run_cli(["check", *INCIDENT_HW, "--json", "--html", str(out), "--", *INCIDENT_CMD])
    assert code == 1 and json.loads(stdout) == embedded(out.read_text())  # stdout stays pure JSON


def test_plan_html(tmp_path):
    out = tmp_path / "p.html"
    code, _, _ = run_cli(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h100", "--host-mem-gib", "1024",
                          "--engine-version", "0.5.9", "--html", str(out)])
    html = out.read_text()
    assert code == 0 and 'data-kind="plan"' in html and embedded(html)["engine"] == "sglang"


def test_explain_html(tmp_path):
    log = write_incident_log(tmp_path / "server.log")
    out = tmp_path / "e.html"
    code, _, err = run_cli(["explain", str(log), "--gpu", INCIDENT_HW[1], "--html", str(out)])
    assert code == 0, err
    html = out.read_text()
    assert_self_contained(html)
    d = embedded(html)
    assert d["plan"]["per_rank"]["kv_tokens"] == d["predicted"]["kv_tokens"]  # the rebuilt launch's check JSON
    assert 'id="explain-chart"' in html and 'data-key="kv_tokens:log"' in html and 'id="gpu-chart"' in html
    assert f'data-value="{d["observed"]["kv_tokens"]}"' in html  # 116,171: the log's own pool


def test_diagnose_html(tmp_path):
    log = write_incident_log(tmp_path / "server.log")
    out = tmp_path / "d.html"
    code, _, err = run_cli(["diagnose", "--log", str(log), "--gpu", INCIDENT_HW[1], "--engine-version", "0.5.9",
                            "--host-mem-gib", "449", "--html", str(out)])
    assert code == 0, err
    html = out.read_text()
    assert_self_contained(html)
    d = embedded(html)
    assert d["bottleneck"] == "kv-capacity" and len(d["series"]) == 30  # the log's 30 decode lines
    assert all(0.85 <= p["kv_usage"] <= 0.96 for p in d["series"])  # token usage as the log prints it
    for key in ("running", "queued", "kv-usage", "gen-tps"):
        assert f'id="series-{key}"' in html
    for key in ("kv-tokens", "requests", "expected-gen-tps"):
        assert f'id="lever-{key}"' in html
    assert html.count('data-key="current"') >= 3  # current marked on each lever chart


def test_missing_jinja2_is_one_line_with_the_pip_command(tmp_path):
    code = ("import sys; sys.modules['jinja2'] = None\n"
            "from kvplan.cli.main import main\n"
            f"sys.exit(main(['check', '--example', '--html', {str(tmp_path / 'r.html')!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == ("kvplan: error: --html needs jinja2, which is not installed "
                                "(pip install 'jinja2' (kvplan installs it by default))")
    assert not (tmp_path / "r.html").exists()


def test_unwritable_path_is_one_line(tmp_path):
    code, _, err = run_cli(["check", "--example", "--html", str(tmp_path / "no" / "such" / "dir" / "r.html")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write the HTML report" in err


@pytest.mark.parametrize("bad", ["</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>"])
def test_hostile_text_is_escaped(tmp_path, bad):
    from kvplan.report.html import render_html

    d = json.loads(run_cli(["check", "--example", "--json"])[1])
    d["findings"][0]["message"] = bad
    d["suggested_command"] = bad
    html = render_html("check", d)
    assert bad not in html  # escaped in the page and in the embedded JSON
    assert embedded(html)["suggested_command"] == bad


def test_cli_start_up_does_not_import_jinja2():
    p = subprocess.run([sys.executable, "-c", "import sys; from kvplan.cli.main import build_parser; build_parser();"
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                        "('jinja2', 'starlette', 'uvicorn', 'markupsafe')))"], capture_output=True, text=True,
                       timeout=600)
    assert p.stdout.strip() == "[]"


def test_templates_ship_with_the_package():
    import kvplan.report.html.render as r
    import kvplan.serve.page as page

    names = {p.name for p in Path(r.TEMPLATES).iterdir()} | {p.name for p in Path(page.HERE).iterdir()}
    assert {"base.html.j2", "check.html.j2", "style.css", "copy.js", "page.html.j2", "page.js"} <= names
