"""Every dashboard page over the database a fresh `drafters up` makes (the catalog, the demo's local pairs measured
by worker jobs, a watcher event) shows no error box: first through AppTest, then in headless Chromium reading the
text a person sees."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.runs import Run
from dashboard.data import md
from registry.domain import memory
from tests.registry.run_fixtures import measured
from tests.dashboard.conftest import PAGE_NAMES, SCREENSHOTS, local_pair_db, point_dashboard_at, run_page, served

MODELS = "/home/someone/.drafters/models"
# (target folder, drafter folder, method, job id): what the demo's worker jobs record, one run per pair.
DEMO_RUNS = [
    (f"{MODELS}/tiny-qwen3-target-d832ed27", f"{MODELS}/tiny-qwen3-draft-lm-trained-fda43dd7", "draft-lm", 1),
    (f"{MODELS}/tiny-qwen3-target-d832ed27", f"{MODELS}/tiny-dflash-trained-fb6f24cd", "dflash", 2),
    (f"{MODELS}/tiny-gemma4-target-95f44ebd", f"{MODELS}/tiny-gemma4-assistant-trained-b7cc24b6", "gemma4-assistant", 3),
    (f"{MODELS}/tiny-qwen3-target-d832ed27", f"{MODELS}/tiny-eagle3-trained-1c6fb61f", "eagle3", 4),
]
ERROR_MARKERS = ("failed:", "Traceback", "Error:", "database error")


def seed_demo(url: str) -> None:
    store = Store.open(url)
    store.catalog.load_catalog()
    for target, drafter, method, job in DEMO_RUNS:
        store.runs.record_run(Run(
            target=target, drafter=drafter, method=method, job_id=None, run_id=f"job{job}", engine="pytorch",
            engine_version="torch 2.13.0+cpu", target_revision="c" * 64, drafter_revision="d" * 64, draft_length=4,
            settings=RunSettings(seed=0, dtype="float32", draft_length=4), device_name="cpu (x86_64)",
            hardware="cpu (x86_64)", torch_version="2.13.0", transformers_version="5.24.0", lossless=True,
            overall=measured(tau=3.9, acceptance_rate=0.72, marginal=(0.9, 0.7, 0.5), baseline_tokens_per_s=7.8,
                             tokens_per_s=4.7, speedup=0.61, efficiency=1.39, lossless=True),
            peak_memory_bytes=427_220_992, target_weight_bytes=2_015_040, drafter_weight_bytes=405_696,
            metric_version=2,
            per_set=(measured("gsm8k", "g", tau=3.9, speedup=0.61, lossless=True, marginal=(0.9, 0.7, 0.5)),)))
    store.events.record_event(EventSpec(type="drafter_released", subject="z-lab/Qwen3.5-27B-DFlash", dedupe_key="demo:1",
                                 payload={"message": "dflash drafter z-lab/Qwen3.5-27B-DFlash released"},
                                 org="z-lab", family="Qwen3.5"))
    store.engine.dispose()


@pytest.fixture
def demo_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    seed_demo(url)
    point_dashboard_at(url, monkeypatch)
    return url


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_page_over_the_demo_database_has_no_error_box(demo_db: str, page: str) -> None:
    app = run_page(page)
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    # The one warning a demo database earns: its tiny CPU pairs are slower with their drafter, and it says why.
    warnings = [w.value for w in app.warning]
    assert all("slower with their drafter" in w and "On a CPU with tiny models" in w for w in warnings), warnings


def test_a_local_pair_has_a_short_name_a_verdict_and_a_memory_budget(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target, drafter = tmp_path / "models" / "tiny-qwen3-target-aa11", tmp_path / "models" / "tiny-dflash-bb22"
    point_dashboard_at(local_pair_db(tmp_path, target, drafter), monkeypatch)
    app = run_page("pair")
    assert not app.error and not app.exception, [e.value for e in app.error]
    assert app.selectbox(key="target").value == str(target)
    shown = [app.selectbox(key=key).format_func(app.selectbox(key=key).value) for key in ("target", "drafter")]
    assert shown == ["tiny Qwen3 target (demo)", "tiny DFlash drafter (demo)"]  # labels, not paths
    assert any(c.proto.help == md(str(target)) for c in app.caption)  # the full path on hover, as text
    markdown = " ".join(m.value for m in app.markdown)
    assert f"**structural** between {md('tiny Qwen3 target (demo)')}" in markdown, markdown
    captions = " ".join(c.value for c in app.caption)
    expected = memory.estimate_parameters(parameter_count=None, weight_bytes=2_000_000_000, config=None,
                                          size_label=None).parameters
    assert expected is not None and f"drafter ≈ {expected / 1e9:.2f} B parameters" in captions, captions
    assert "weight bytes" in captions


def test_each_local_pair_shows_its_runs(demo_db: str) -> None:
    for target, drafter, _, job in DEMO_RUNS:
        app = run_page("pair", query_params={"target": target, "drafter": drafter})
        assert not app.error and not app.exception, [e.value for e in app.error]
        runs = next(e.value for e in app.dataframe if "run_id" in e.value.columns)
        assert list(runs["run_id"]) == [f"job{job}"]
        assert "None" not in runs.astype(str).to_numpy().tolist()


# ---- the same database in Chromium -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("dashboard-demo")
    url = f"sqlite:///{root / 'registry.db'}"
    seed_demo(url)
    with served(root, url) as base:
        yield base


@pytest.mark.browser
@pytest.mark.parametrize("path", PAGE_NAMES)
def test_every_page_over_the_demo_database_in_chromium(demo_server: str, browser_page, path: str) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page = browser_page
    page.goto(f"{demo_server}/{'' if path == 'overview' else path}", wait_until="domcontentloaded")
    expect(page.get_by_test_id("stMain")).to_be_visible(timeout=60_000)
    page.wait_for_timeout(1000)
    expect(page.get_by_test_id("stStatusWidget").filter(has_text="Running")).to_have_count(0, timeout=60_000)
    page.wait_for_timeout(1500)  # let Vega draw the charts before the screenshot
    text = page.get_by_test_id("stMain").inner_text()
    assert page.locator('[data-testid="stException"]').count() == 0, text[:2000]
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, text[:2000]
    assert not any(marker in text for marker in ERROR_MARKERS), text[:2000]
    assert MODELS not in text  # local folders read as "tiny Qwen3 target (demo)", never by their path
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"demo-{path}.png"), full_page=True)
