"""End to end: `streamlit run` on a loopback port against a seeded SQLite database, each page opened in headless
Chromium; no exception box, the page's key text present, and a screenshot of it in artifacts/screenshots/."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.launch import launch
from registry.store import Store
from tests.conftest import REPO_ROOT
from tests.dashboard.conftest import seed

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
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
START_TIMEOUT_S = 90
PAGE_TIMEOUT_MS = 60_000


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_healthy(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"streamlit did not answer on port {port} within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard served from a seeded SQLite database; yields its base URL."""
    root = tmp_path_factory.mktemp("dashboard-e2e")
    url = f"sqlite:///{root / 'registry.db'}"
    store = Store.open(url)
    seed(store, url)
    store.engine.dispose()
    env = {
        key: value for key, value in os.environ.items()
        if key not in ("HF_TOKEN", "DRAFTERS_HF_TOKEN", "DRAFTERS_DATABASE_URL")
    }
    env.update({"DRAFTERS_HOME": str(root / "home"), "HF_HUB_DISABLE_TELEMETRY": "1",
                "NO_PROXY": "127.0.0.1,localhost"})
    port = _free_port()
    log = root / "streamlit.log"
    with log.open("wb") as sink:
        process = launch(port, url, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_until_healthy(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: run `bash tests/services.sh` (the tests never download a browser)")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 2400},  # Streamlit scrolls inside a div: full_page alone stops at the fold
        )
        try:
            yield context.new_page()
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


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
