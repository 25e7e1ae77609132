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
from registry.watch import Watcher
from tests.conftest import _create_pg_database, _drop_pg_database
from tests.fakehub.scenario import QWEN3_8B_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, target_files, utc
from tests.registry.test_watch_faults import ORGS, make_client, picture

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS = 10
SEED = 20260422
SLOW_API_S = 0.1  # every /api/ answer takes this long, so a poll lasts seconds and kills land inside it
EXTRA_FINETUNES = 8


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


def publish_finetunes(state: HubState) -> None:
    """Derivatives of a drafted model: each one is a unit with config and tokenizer reads, so the poll is long."""
    for index in range(EXTRA_FINETUNES):
        state.add_repo(
            f"acme-labs/Qwen3-8B-Domain-{index}", date=utc(2026, 4, 23, index), library_name="transformers",
            files=target_files(QWEN3_8B_CONFIG, weight_seed=100 + index,
                               card_data={"license": "apache-2.0", "base_model": "Qwen/Qwen3-8B"}),
        )


def start_watcher(database_url: str, hub_url: str, cache_dir: Path) -> subprocess.Popen[str]:
    """A watcher process that has opened the database and is about to poll."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.watch_process", database_url, hub_url, str(cache_dir), *ORGS],
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
    reference = Store.open(reference_url)
    with FakeHub(scenario.state) as hub:
        # The same history in both databases: the day-0 baseline, then every step and more, polled at once.
        for target in (store, reference):
            assert not Watcher(target, make_client(hub.url, tmp_path / "cache-baseline"), ORGS).poll_once().errors
        scenario.advance_through("qwen36_27b_appears")
        publish_finetunes(scenario.state)
        scenario.state.inject(r"^/api/", "slow", times=None, seconds=SLOW_API_S)

        hub.clear_requests()
        uninterrupted = Watcher(reference, make_client(hub.url, tmp_path / "cache-reference"), ORGS).poll_once()
        assert not uninterrupted.errors
        assert len(uninterrupted.events) >= 5 + EXTRA_FINETUNES
        api_requests = hub.count(path_regex=r"^/api/")

        # Each run needs at least api_requests * SLOW_API_S seconds, less what earlier runs committed, and no run
        # can commit more than it had time to ask for. Kill delays that add up to 70% of that bound therefore
        # all land before the poll could have finished, wherever they fall.
        rng = random.Random(SEED)
        weights = [rng.random() for _ in range(KILLS)]
        delays = [0.7 * api_requests * SLOW_API_S * w / sum(weights) for w in weights]
        cache = tmp_path / "cache-killed"  # shared by every run, as a restarted watcher's would be
        for delay in delays:
            process = start_watcher(database_url, hub.url, cache)
            time.sleep(delay)
            assert process.poll() is None, "the poll finished before its kill"
            process.send_signal(signal.SIGKILL)
            process.communicate()
            assert process.returncode == -signal.SIGKILL

        process = start_watcher(database_url, hub.url, cache)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stdout + stderr
        assert stdout.startswith("done")

    assert picture(store) == picture(reference)
    reference.engine.dispose()
