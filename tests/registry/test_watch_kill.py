"""A watcher process SIGKILLed at random points of a poll, ten times, then rerun, ends with the database an
uninterrupted poll gives: each unit of work commits whole or not at all, and the cursor resumes after the last one.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.store import Store
from registry.watch.poller import Watcher
from tests.conftest import _create_pg_database, _drop_pg_database
from tests.fakehub.scenario import QWEN3_8B_CONFIG, QWEN3_8B_DFLASH_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, dflash_drafter_files, target_files, utc
from tests.registry.watch_support import make_client, picture

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS = 10
SEED = 20260422
SLOW_S = 0.02  # every answer takes this long, so a poll lasts seconds and kills land inside it
# z-lab first: its new drafters' units are where Hub reads follow the unit's first writes.
KILL_ORGS = ["z-lab", "Qwen", "meta-llama", "acme-labs"]
WIDGETS = 8


@pytest.fixture
def reference_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database on the same backend, for the uninterrupted run."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'reference.db'}"
        return
    url = _create_pg_database()
    try:
        yield url
    finally:
        _drop_pg_database(url)


def publish_widgets(state: HubState) -> None:
    """Models outside every drafted line: the baseline records them from the listing alone."""
    for size in range(1, WIDGETS + 1):
        state.add_repo(f"acme-labs/Widget-{size}B", date=utc(2025, 8, size), library_name="transformers",
                       files=target_files(QWEN3_8B_CONFIG, weight_seed=size, card_data={"license": "mit"}))


def publish_widget_drafters(state: HubState) -> None:
    """A drafter for each widget: its unit writes the drafter, then reads its target's config and tokenizer from
    the Hub (the target was only listed so far), then records the verdict and the release event."""
    for size in range(1, WIDGETS + 1):
        state.add_repo(f"z-lab/Widget-{size}B-DFlash", date=utc(2026, 4, 23, size), tags=("dflash",),
                       library_name="transformers", files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, size),
                       card_data={"license": "mit", "base_model": f"acme-labs/Widget-{size}B"})


def start_watcher(database_url: str, hub_url: str, cache_dir: Path) -> subprocess.Popen[str]:
    """A watcher process that has opened the database and is about to poll."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.watch_process", database_url, hub_url, str(cache_dir), *KILL_ORGS],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "polling":
        process.kill()
        _, stderr = process.communicate()
        pytest.fail(f"the watcher process did not start: {stderr}")
    return process


def test_sigkill_at_random_points_then_a_rerun_equals_an_uninterrupted_poll(
    store: Store, reference_url: str, database_url: str, tmp_path: Path
) -> None:
    scenario = Scenario.standard()
    publish_widgets(scenario.state)
    reference = Store.open(reference_url)
    with FakeHub(scenario.state) as hub:
        # The same history in both databases: the day-0 baseline, then every step and more, polled at once.
        for target in (store, reference):
            assert not Watcher(target, make_client(hub.url, tmp_path / "cache-baseline"), KILL_ORGS).poll_once().errors
        scenario.advance_through("qwen36_27b_appears")
        publish_widget_drafters(scenario.state)
        scenario.state.inject(r".", "slow", times=None, seconds=SLOW_S)

        hub.clear_requests()
        uninterrupted = Watcher(reference, make_client(hub.url, tmp_path / "cache-reference"), KILL_ORGS).poll_once()
        assert not uninterrupted.errors
        assert {"drafter_released", "weights_changed", "base_upgrade"} <= {e.type for e in uninterrupted.events}

        # Kill delays average a twelfth of the uninterrupted poll. A run redoes its listing and loses the unit it is
        # killed in (a widget drafter's unit is about a tenth of the poll), so the ten runs together get through
        # well under all of it: every kill lands inside a poll, at a different point of it.
        rng = random.Random(SEED)
        delays = [rng.uniform(0.0, uninterrupted.seconds / 6) for _ in range(KILLS)]
        # Each run gets a download cache of its own: with a shared one, a rerun would skip the Hub reads of the
        # unit its predecessor was killed in and the ten runs could finish the poll. The database is under test.
        for run, delay in enumerate(delays):
            process = start_watcher(database_url, hub.url, tmp_path / f"cache-{run}")
            time.sleep(delay)
            assert process.poll() is None, "the poll finished before its kill"
            process.send_signal(signal.SIGKILL)
            process.communicate()
            assert process.returncode == -signal.SIGKILL

        process = start_watcher(database_url, hub.url, tmp_path / "cache-final")
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stdout + stderr
        assert stdout.startswith("done")

    events, tables = picture(store)
    expected_events, expected_tables = picture(reference)
    reference.engine.dispose()
    assert events == expected_events  # none lost, none twice
    assert tables == expected_tables
