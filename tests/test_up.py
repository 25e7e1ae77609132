"""The README's main job end to end: `drafters up` against a fake Hub, then the dashboard in Chromium.

What a new user sees after the first command: the catalog's 21 DFlash drafters, their lag, the tiny pairs'
measured speedups, and the alerts the watcher raised — and the screenshots in artifacts/screenshots show it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from registry.domain.json_shapes import SCHEMA_VERSION
from registry.store import Store
from tests.conftest import REPO_ROOT
from tests.dashboard.conftest import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, free_port
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub
from tests.support.cli import popen, stop

pytestmark = pytest.mark.browser
RUNS_TIMEOUT_S = 900


class Output:
    """Collects a process's output lines in a thread so the test can wait for one."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.lines:
                if match := re.search(pattern, line):
                    return match
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines[-40:]))


def test_up_shows_drafters_lag_speedups_and_alerts(tmp_path: Path, hub: FakeHub, scenario: Scenario) -> None:
    home = tmp_path / "home"
    database_url = f"sqlite:///{home / 'registry.db'}"
    port = free_port()
    models = Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models"))
    env = {
        "DRAFTERS_HOME": str(home),
        "DRAFTERS_HUB_ENDPOINT": hub.url,
        "DRAFTERS_WATCHED_ORGS": json.dumps(["Qwen", "z-lab", "meta-llama"]),
        "DRAFTERS_WATCH_INTERVAL_S": "2",
        "DRAFTERS_DASHBOARD_PORT": str(port),
        "DRAFTERS_API_PORT": str(free_port()),
        "DRAFTERS_MODELS_DIR": str(models),
        "DRAFTERS_DEMO_MAX_NEW_TOKENS": "12",
        "DRAFTERS_DEMO_REPEATS": "1",
        # The scenario's repos hold stand-in weights; autoverify's end to end is tests/verifier/test_autoverify.py.
        "DRAFTERS_AUTOVERIFY": "0",
        "COLUMNS": "200",
    }
    process = popen(["up"], env=env, drop=("HF_TOKEN", "DRAFTERS_DATABASE_URL"))
    output = Output(process)
    try:
        url = output.wait_for(r"dashboard: (http://127\.0\.0\.1:\d+/)", 120).group(1)
        output.wait_for(r"watching 3 orgs", 120)
        api_url = output.wait_for(r"API: (http://127\.0\.0\.1:\d+)/", 60).group(1)
        assert httpx.get(f"{api_url}/v1/lag", timeout=30).json()["schema_version"] == SCHEMA_VERSION  # `up` serves the API
        # Catalog targets are known before the Hub shows them; what changes after the baseline poll is news.
        scenario.advance_through("weights_replaced")
        output.wait_for(r"\[drafter_released\] .*z-lab/Qwen3\.5-27B-DFlash", 60)
        output.wait_for(r"\[weights_changed\] .*z-lab/Qwen3-8B-DFlash-b16", 60)
        store = Store.open(database_url)
        deadline = time.monotonic() + RUNS_TIMEOUT_S
        while len([r for r in store.runs.list_runs() if r.status == "ok"]) < 5 and time.monotonic() < deadline:
            assert process.poll() is None, "\n".join(output.lines[-40:])
            time.sleep(2)
        runs = store.runs.list_runs()
        assert len(runs) == 5 and all(r.status == "ok" and r.lossless for r in runs), [
            (r.drafter, r.status, r.failure_reason) for r in runs
        ]
        assert {r.method for r in runs} == {"draft-lm", "dflash", "eagle3", "gemma4-assistant"}
        # `up` says each build step and each result as it comes, not only "done".
        assert any(re.fullmatch(r".*demo model 7 of 7, Gemma-4 DFlash drafter: (built in \d+ s|cached)", line)
                   for line in output.lines), output.lines[-40:]
        # the demo's folders by their labels, as the dashboard shows them, not their paths
        result = re.compile(r"verify job \d+: done: tiny [^+/]+ \(demo\) \+ tiny [^/]+ \(demo\): "
                            r"\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d, n=1\), τ \d+\.\d\d")
        results = [line for line in output.lines if result.search(line)]
        assert len(results) == 5, output.lines[-40:]
        # and each measurement as it goes, before its result
        assert any(re.search(r"verify job \d+: \d+ of \d+ steps \(.+\)", line) for line in output.lines), output.lines[-40:]
        assert sum(1 for d in store.reads.drafters() if d.in_21) == 21
        store.engine.dispose()
        _screenshots(url)
    finally:
        stop(process, timeout=20, read=False)  # the Output thread reads what it prints


def _screenshots(url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    pages = {
        "overview": ["DFlash v1 drafters", "Measured speedups", "The DFlash v1 drafters"],
        "lag": ["Open lags, still growing", "Base upgrades waiting for a drafter"],
        "benchmarks": ["Speedup and τ per prompt set"],
        "alerts": ["Atom feed"],
    }
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(SCREENSHOTS.parent / ".chromium-up"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 2600},
        )
        try:
            page = context.new_page()
            for path, texts in pages.items():
                # The default page lives at the root; /overview would answer "page not found".
                page.goto(f"{url}{'' if path == 'overview' else path}", wait_until="domcontentloaded")
                for text in texts:
                    expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=60_000)
                expect(page.get_by_test_id("stStatusWidget").filter(has_text="Running")).to_have_count(
                    0, timeout=60_000
                )
                page.wait_for_timeout(500)
                assert page.locator('[data-testid="stException"]').count() == 0
                assert page.get_by_text("Page not found").count() == 0
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / f"up-{path}.png"), full_page=True)
        finally:
            context.close()


def test_the_readme_names_the_demo_pairs_up_measures() -> None:
    from verifier.demo import DemoModels, demo_requests

    pairs = demo_requests(DemoModels(*(Path(f"/m/{i}") for i in range(7))))
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(pairs) == 5 and "five pairs" in readme
    assert "Gemma-4 target with its assistant\ndrafter and a DFlash drafter" in readme
