"""End to end: `streamlit run` on a loopback port against a seeded SQLite database, each page opened in headless
Chromium; no exception box, the page's key text present, and a screenshot of it in artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from registry.store import Store
from tests.dashboard.conftest import SCREENSHOTS, seed, served

pytestmark = pytest.mark.browser

# url path -> text that shows only once the page's script has run to the end (table cells are drawn on a
# canvas, so the key text is headings, metrics and captions)
PAGES = {
    "overview": ["Targets tracked", "Latest events", "Benchmark runs"],
    "availability": ["Checkpoints × drafter methods", "Checkpoints by best verdict per method"],
    "lag": ["Open lags, still growing", "Base upgrades waiting for a drafter"],
    "benchmarks": ["Speedup and τ per prompt set", "Acceptance by draft position", "Failed runs"],
    "pair": ["Memory budget", "Revisions"],
    "alerts": ["Atom feed", "drafters feed"],
}
PAGE_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard served from a seeded SQLite database; yields its base URL."""
    root = tmp_path_factory.mktemp("dashboard-e2e")
    url = f"sqlite:///{root / 'registry.db'}"
    store = Store.open(url)
    seed(store, url)
    store.engine.dispose()
    with served(root, url) as base:
        yield base


@pytest.mark.parametrize("path", list(PAGES))
def test_page_renders_in_chromium(server: str, browser_page, path: str) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = browser_page
    # The default page lives at the root; /overview would answer "page not found".
    page.goto(f"{server}/{'' if path == 'overview' else path}", wait_until="domcontentloaded")
    assert page.get_by_text("Page not found").count() == 0
    for text in PAGES[path]:
        expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    # The script has finished once the status widget no longer says it is running.
    expect(page.get_by_test_id("stStatusWidget").filter(has_text="Running")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(500)  # let Vega draw the charts before the screenshot
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]'
    ).first.inner_text()
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path}.png"), full_page=True)
