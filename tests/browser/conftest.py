"""A real browser for the report and page tests: Debian's headless Chromium driven by Playwright for Python
(``executable_path``; Playwright's own browser download is never used). ``.ci/run`` installs both.

Without the browser the tests are skipped with the reason, except under ``CI``, where they fail (like
tests/integration). Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("KVPLAN_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
VIEWPORT = {"width": 1040, "height": 900}


def unavailable() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, as .ci/run does; or set KVPLAN_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="kvplan-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                   viewport=VIEWPORT, locale="en-US")
        try:
            yield ctx
        finally:
            ctx.close()


class Page:
    """A page that records its console errors and every request it makes."""

    def __init__(self, ctx: Any):
        self.page = ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def shot(self, name: str, **kw: Any) -> Path:
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), **kw)
        return path


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    try:
        yield p
    finally:
        p.page.close()
