"""A registry seeded through the project's own API (Store upserts, record_run, record_event) for the dashboard
tests, helpers to run its pages with AppTest, and what the browser tests share (a served dashboard, Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from dashboard.launch import launch
from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions
from registry.domain.records import CheckpointSpec, DrafterSpec, EventSpec, RevisionSpec
from registry.settings import get_settings
from registry.store import Store
from registry.store.runs import Run
from tests.conftest import REPO_ROOT
from tests.registry.run_fixtures import measured
from tests.support.cli import stop

CONFIGS = REPO_ROOT / "tests" / "data" / "configs"
PAGES = REPO_ROOT / "dashboard" / "views"
PAGE_NAMES = ("overview", "availability", "lag", "benchmarks", "pair", "alerts", "plan")
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
START_TIMEOUT_S = 90

QWEN3_8B = "Qwen/Qwen3-8B"
QWEN3_4B = "Qwen/Qwen3-4B"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN36_27B = "Qwen/Qwen3.6-27B"  # declared by a drafter nobody has read yet: an open lag
QWEN36_8B = "Qwen/Qwen3.6-8B"  # a successor of Qwen3-8B without a drafter: a waiting upgrade
DFLASH_8B = "z-lab/Qwen3-8B-DFlash-b16"
DFLASH_4B = "z-lab/Qwen3-4B-DFlash-b16"
EAGLE_8B = "RedHatAI/Qwen3-8B-speculator.eagle3"
EAGLE_LLAMA = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
DFLASH_36_27B = "z-lab/Qwen3.6-27B-DFlash"

TARGET_SHA_1 = "1" * 40
TARGET_SHA_2 = "2" * 40  # the weights changed in place after the third H200 run
DRAFTER_SHA = "d" * 40
RUN_START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def config_bytes(name: str) -> bytes:
    return (CONFIGS / name).read_bytes()


@dataclass(frozen=True)
class Seeded:
    url: str
    store: Store
    # (hardware, prompt set) -> speedups of the successful runs of (QWEN3_8B, DFLASH_8B), in run order
    speedups: dict[tuple[str, str], list[float]]
    run_ids: list[str]  # successful runs of (QWEN3_8B, DFLASH_8B), oldest first
    failed_run_id: str
    per_position: dict[str, tuple[float, ...]]  # prompt set -> rates of the newest H200 run


def _checkpoint(store: Store, repo_id: str, family: str, released: date, config: str | None,
                weight_bytes: int | None = None, parameter_count: int | None = None) -> None:
    store.checkpoints.upsert_checkpoint(
        CheckpointSpec(repo_id=repo_id, source="hub", family=family, kind="base", released=released,
                       released_precision="day")
    )
    if config is not None:
        store.checkpoints.add_checkpoint_revision(
            repo_id,
            RevisionSpec(sha=TARGET_SHA_1, config_raw=config_bytes(config), weight_bytes=weight_bytes,
                         parameter_count=parameter_count),
        )


def _drafter(store: Store, repo_id: str, method: str, target: str, released: date, config: str | None,
             weight_bytes: int | None = None) -> None:
    store.drafters.upsert_drafter(
        DrafterSpec(repo_id=repo_id, method=method, publisher=repo_id.split("/")[0], source="hub",
                    targets=((target, "catalog"),), released=released, released_precision="day")
    )
    if config is not None:
        store.drafters.add_drafter_revision(
            repo_id, RevisionSpec(sha=DRAFTER_SHA, config_raw=config_bytes(config), weight_bytes=weight_bytes)
        )


def _runs(store: Store) -> tuple[dict[tuple[str, str], list[float]], list[str], str, dict[str, tuple[float, ...]]]:
    speedups: dict[tuple[str, str], list[float]] = {}
    run_ids: list[str] = []
    per_position: dict[str, tuple[float, ...]] = {}
    plan = [  # hardware, target revision, speedup on gsm8k (mt-bench is 1.0 lower)
        ("H200", TARGET_SHA_1, 4.0),
        ("H200", TARGET_SHA_1, 4.4),
        ("H200", TARGET_SHA_1, 4.2),
        ("H200", TARGET_SHA_2, 2.1),  # the regression after the in-place weight change
        ("RTX 3090", TARGET_SHA_1, 2.5),
        ("RTX 3090", TARGET_SHA_1, 2.7),
    ]
    for index, (hardware, revision, speedup) in enumerate(plan):
        sets = []
        for prompt_set, offset in (("gsm8k", 0.0), ("mt-bench", -1.0)):
            rates = (0.9 - 0.1 * index / 10, 0.7, 0.5 - offset / 10, 0.3)
            sets.append(
                measured(prompt_set, f"digest-{prompt_set}", tau=speedup + 1.5 + offset, marginal=rates,
                         speedup=speedup + offset, speedup_spread=0.05, lossless=True, acceptance_rate=0.6)
            )
            speedups.setdefault((hardware, prompt_set), []).append(speedup + offset)
            if hardware == "H200":
                per_position[prompt_set] = rates
        # Stored before metric versions existed: version 1 (what migration 0007 gives such rows).
        run = store.runs.record_run(
            Run(target=QWEN3_8B, drafter=DFLASH_8B, method="dflash", hardware=hardware, engine="pytorch",
                target_revision=revision, drafter_revision=DRAFTER_SHA, draft_length=16,
                overall=measured(tau=speedup + 1.5, speedup=speedup), per_set=tuple(sets), metric_version=1,
                created_at=RUN_START + timedelta(days=index)),
        )
        run_ids.append(run.run_id or "")
    failed = store.runs.record_run(
        Run(target=QWEN3_8B, drafter=DFLASH_8B, method="dflash", status="failed", hardware="H200", metric_version=1,
            failure_reason="CUDA out of memory while loading the drafter", created_at=RUN_START + timedelta(days=9)),
    )
    store.runs.record_run(
        Run(target=LLAMA, drafter=EAGLE_LLAMA, method="eagle3", hardware="H200", engine="pytorch",
            overall=measured(tau=3.0, speedup=2.2), metric_version=1, created_at=RUN_START,
            per_set=(measured("mt-bench", "digest-mt-bench", speedup=2.2, tau=3.0, marginal=(0.8, 0.5)),)),
    )
    return speedups, run_ids, failed.run_id or "", per_position


def seed_curves(store: Store) -> None:
    """Sweeps of the seeded pair on one H100: vllm-project/vllm#50851's shape (2.1× at c1, a slowdown from c8) at
    256 tokens, the same prompts at 1,024 tokens, and math prompts at 256: a concurrency, a length and a
    kind-of-prompt curve."""
    speedups = {1: 2.1, 4: 1.4, 8: 0.77, 16: 0.7}
    points = tuple(CurvePoint(concurrency=c, requests=16, output_tokens=2048, seconds=2.0, tokens_per_s=100 * s,
                              baseline_tokens_per_s=100.0, latency_per_token_s=0.02, baseline_latency_per_token_s=0.03,
                              tau=3.1, drafts=600) for c, s in speedups.items())
    for max_new_tokens, prompt_set, scale in ((256, "sweep-default", 1.0), (1024, "sweep-default", 0.5),
                                              (256, "cat-math", 1.25)):
        conditions = SweepConditions(max_new_tokens=max_new_tokens, temperature=0.0, prompt_set=prompt_set,
                                     prompt_digest=prompt_set, requests_per_level=16, url="http://gpu:8000",
                                     baseline_url="http://gpu:8001")
        store.curves.record_curve(SpeedupCurve(
            target=QWEN3_8B, drafter=DFLASH_8B, engine="vllm", engine_version="0.21.1", hardware="H100",
            conditions=conditions, points=tuple(replace(p, tokens_per_s=p.tokens_per_s * scale) for p in points)))


def seed(store: Store, url: str) -> Seeded:
    _checkpoint(store, QWEN3_8B, "Qwen3", date(2025, 4, 29), "Qwen__Qwen3-8B.json",
                weight_bytes=16_381_470_720, parameter_count=8_190_735_360)
    _checkpoint(store, QWEN3_4B, "Qwen3", date(2025, 4, 29), "Qwen__Qwen3-4B.json")
    _checkpoint(store, LLAMA, "Llama-3.1", date(2024, 7, 23), "meta-llama__Llama-3.1-8B-Instruct.json")
    _checkpoint(store, QWEN36_27B, "Qwen3.6", date(2026, 4, 22), None)
    _checkpoint(store, QWEN36_8B, "Qwen3.6", date(2026, 5, 1), None)
    _drafter(store, DFLASH_8B, "dflash", QWEN3_8B, date(2026, 1, 5), "z-lab__Qwen3-8B-DFlash-b16.json",
             weight_bytes=2_000_000_000)
    _drafter(store, DFLASH_4B, "dflash", QWEN3_4B, date(2026, 1, 5), "z-lab__Qwen3-4B-DFlash-b16.json")
    _drafter(store, EAGLE_8B, "eagle3", QWEN3_8B, date(2025, 6, 1), "RedHatAI__Qwen3-8B-speculator.eagle3.json")
    _drafter(store, EAGLE_LLAMA, "eagle3", LLAMA, date(2025, 3, 1), "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    _drafter(store, DFLASH_36_27B, "dflash", QWEN36_27B, date(2026, 4, 23), None)
    store.verdicts.recompute_compatibility()
    for index, (kind, subject, org, family) in enumerate([
        ("new_drafter", DFLASH_8B, "Qwen", "Qwen3"),
        ("new_drafter", EAGLE_LLAMA, "meta-llama", "Llama-3.1"),
        ("lag_opened", QWEN36_27B, "Qwen", "Qwen3.6"),
        ("revision_changed", QWEN3_8B, "Qwen", "Qwen3"),
    ]):
        store.events.record_event(
            EventSpec(type=kind, subject=subject, dedupe_key=f"{kind}:{subject}:{index}", org=org, family=family,
                      payload={"message": f"{kind.replace('_', ' ')}: {subject}"})
        )
    speedups, run_ids, failed, per_position = _runs(store)
    return Seeded(url=url, store=store, speedups=speedups, run_ids=run_ids, failed_run_id=failed,
                  per_position=per_position)


@pytest.fixture
def seeded(store: Store, database_url: str) -> Seeded:
    """The seeded registry on SQLite and on PostgreSQL."""
    return seed(store, database_url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'dashboard.db'}"


@pytest.fixture
def dashboard_db(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Seeded]:
    """The seeded registry on SQLite, and the dashboard pointed at it."""
    store = Store.open(sqlite_url)
    seeded = seed(store, sqlite_url)
    point_dashboard_at(sqlite_url, monkeypatch)
    yield seeded
    store.engine.dispose()


def local_pair_db(tmp_path: Path, target: Path, drafter: Path) -> str:
    """A database with one measured run of a local pair: two model folders (Qwen3-8B and its DFlash drafter's
    configs) under the given names, which outside text can choose."""
    for folder, name in ((target, "Qwen__Qwen3-8B.json"), (drafter, "z-lab__Qwen3-8B-DFlash-b16.json")):
        folder.mkdir(parents=True)
        (folder / "config.json").write_bytes((CONFIGS / name).read_bytes())
    url = f"sqlite:///{tmp_path / 'local.db'}"
    store = Store.open(url)
    store.runs.record_run(Run(target=str(target), drafter=str(drafter), method="dflash", run_id="job1", lossless=True,
                              overall=measured(speedup=1.1), target_weight_bytes=16_000_000_000,
                              drafter_weight_bytes=2_000_000_000))
    store.engine.dispose()
    return url


def point_dashboard_at(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAFTERS_DATABASE_URL", url)
    get_settings.cache_clear()
    # Caches live for the process; each test starts from what its own database holds.
    st.cache_data.clear()


def run_page(name: str, *, query_params: dict[str, str] | None = None) -> AppTest:
    app = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=60)
    for key, value in (query_params or {}).items():
        app.query_params[key] = value
    return app.run()


def chart_data(app: AppTest) -> list[list[pd.DataFrame]]:
    """The data sets of each Altair chart on the page, in page order (a layered chart has several)."""
    return [
        [convert_arrow_bytes_to_pandas_df(dataset.data.data) for dataset in chart.proto.datasets]
        for chart in app.get("vega_lite_chart")
    ]


def chart_specs(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")]


def assert_clean(app: AppTest) -> None:
    """No exception box and no error line on the page."""
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


def frame_with(app: AppTest, column: str) -> pd.DataFrame:
    """The first table on the page that has `column`."""
    for element in app.dataframe:
        frame = element.value
        if column in frame.columns:
            return frame
    raise AssertionError(f"no table with a {column!r} column; tables: {[list(e.value.columns) for e in app.dataframe]}")


# ---- the browser tests: a served dashboard and one Chromium page -------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_healthy(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
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


@contextmanager
def served(root: Path, url: str) -> Iterator[str]:
    """The dashboard served by `streamlit run` on a loopback port over the database at `url`; yields its base URL."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("HF_TOKEN", "DRAFTERS_HF_TOKEN", "DRAFTERS_DATABASE_URL")}
    env.update({"DRAFTERS_HOME": str(root / "home"), "HF_HUB_DISABLE_TELEMETRY": "1",
                "NO_PROXY": "127.0.0.1,localhost"})
    port = free_port()
    log = root / "streamlit.log"
    with log.open("wb") as sink:
        process = launch(port, url, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until_healthy(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process, timeout=30)


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: run `bash tests/services.sh` (the tests never download a browser)")
    # Imported here: only the browser tests need playwright, and every dashboard test loads this file.
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
