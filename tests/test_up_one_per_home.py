"""One `drafters up` per home (hardening round 4, item 5), with real processes (tests/support/cli.py).

Probes guarded here:
- a second `up` on a home another `up` runs on says who holds it (pid, host, start time) in one line and exits 1;
  it used to run beside the first, both with the same watch lease owner, its API crash-looping on the taken port
- the lock goes with its process: once the first `up` is killed (SIGKILL, no clean-up), a new one starts
- two `drafters catalog load` started together on one fresh database both succeed (no raw IntegrityError from the
  concurrent load) and the catalog is there once
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from registry.domain.catalog import load_catalog_data
from registry.store import Store
from tests.support.cli import drafters, popen, running

QUIET = ["up", "--no-watch", "--no-worker", "--no-dashboard", "--no-demo", "--no-api"]


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_DATABASE_URL": database_url,
            "DRAFTERS_WATCHED_ORGS": '["Qwen"]', "DRAFTERS_AUTOVERIFY": "0"}


def test_a_second_up_on_the_same_home_says_who_holds_it_and_exits_1(env: dict[str, str], tmp_path: Path) -> None:
    with running(QUIET, until="at head", env=env) as first:
        assert "at head" in first.output, first.output
        second = drafters(*QUIET, env=env, timeout=120)
        assert second.returncode == 1, second.stdout + second.stderr
        assert "at head" not in second.stdout  # it stopped before touching the database
        [line] = second.stderr.strip().splitlines()
        assert "another `drafters up` is running on" in line and f"pid {first.process.pid} on " in line, line
        assert "started 20" in line and "Traceback" not in second.stderr
        holder = json.loads((tmp_path / "home" / "up.lock").read_text())
        assert holder["pid"] == first.process.pid


def test_the_lock_goes_with_a_killed_up(env: dict[str, str]) -> None:
    first = popen(QUIET, env=env)
    assert first.stdout is not None
    for line in first.stdout:
        if "at head" in line:
            break
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    first.stdout.close()
    with running(QUIET, until="at head", env=env) as again:
        pass
    assert "at head" in again.output, again.output


def test_concurrent_catalog_loads_converge(env: dict[str, str], database_url: str, tmp_path: Path) -> None:
    assert drafters("db", "upgrade", env=env).returncode == 0  # the loads then race on the catalog only
    loads = [popen(["catalog", "load"], env={**env, "DRAFTERS_HOME": str(tmp_path / f"home{i}")}) for i in range(3)]
    for load in loads:
        output = load.communicate(timeout=300)[0]
        assert load.returncode == 0 and "IntegrityError" not in output, output
    store = Store.open(database_url)
    try:
        repo_ids = [d.repo_id for d in store.reads.drafters()]
        assert len(repo_ids) == len(set(repo_ids))
        assert {d.repo_id for d in load_catalog_data().drafters if not d.built_in} <= set(repo_ids)
    finally:
        store.engine.dispose()
