"""End to end: `streamlit run` on a loopback port against a seeded SQLite database, each page opened in headless
Chromium; no exception box, the page's key text present, and a screenshot of it in artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from registry.store import Store
from tests.dashboard.conftest import SCREENSHOTS, seed, seed_curves, served

pytestmark = pytest.mark.browser

# url path -> text that shows only once the page's script has run to the end (table cells are drawn on a
# canvas, so the key text is headings, metrics and captions)
PAGES = {
    "overview": ["What can I use with my checkpoint?", "Targets tracked", "Latest events", "Benchmark runs"],
    "availability": ["Checkpoints × drafter methods", "Checkpoints by best verdict per method", "targets tracked"],
    "lag": ["Open lags, still growing", "Base upgrades waiting for a drafter"],
    "benchmarks": ["Speedup and τ per prompt set", "Dashed rule: 1×, break-even", "Each measured run beside what the "
                   "pricing model", "Acceptance by draft position", "Failed runs", "the first measured concurrency "
                   "where it stops paying", "Speedup vs output length", "Speedup per kind of prompt"],
    "pair": ["Memory budget", "Revisions"],
    "alerts": ["Atom feed", "drafters feed"],
    "plan": ["Plan", "Downloads"],
}
PAGE_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard served from a seeded SQLite database; yields its base URL."""
    root = tmp_path_factory.mktemp("dashboard-e2e")
    url = f"sqlite:///{root / 'registry.db'}"
    store = Store.open(url)
    seed(store, url)
    seed_curves(store)  # the concurrency, length and kind-of-prompt charts drawn
    store.engine.dispose()
    with served(root, url) as base:
        yield base


@pytest.mark.parametrize("path", list(PAGES))
def test_page_renders_in_chromium(server: str, browser_page, path: str) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = browser_page
    # /overview is the landing page too (a bookmark or a typed URL), never a "Page not found" dialog.
    page.goto(f"{server}/{path}", wait_until="domcontentloaded")
    for text in PAGES[path]:
        expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    # The script has finished once the status widget no longer says it is running.
    expect(page.get_by_test_id("stStatusWidget").filter(has_text="Running")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)  # let Vega draw the charts before the screenshot
    assert page.get_by_text("Page not found").count() == 0
    assert page.get_by_test_id("stAppDeployButton").count() == 0  # client.toolbarMode viewer: no Deploy button
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]'
    ).first.inner_text()
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path}.png"), full_page=True)
