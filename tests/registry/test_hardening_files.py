"""Secrets and private files under pressure: a signed subscription whose secret is gone is never sent unsigned;
forty processes writing secrets.json at once keep all forty; feed.atom and dashboard.log are 0600 even under
umask 0."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from registry.alerts import webhooks as alerts
from registry.alerts.secrets import SecretBox
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.models import Delivery
from tests.support.cli import drafters, running
from tests.support.receiver import Receiver

REPO = Path(__file__).resolve().parents[2]
WRITERS = 40


def _event(store: Store, n: int) -> None:
    store.events.record_event(EventSpec(type="drafter_released", subject=f"z-lab/model-{n}", dedupe_key=f"d:{n}",
                                 payload={"message": f"model {n}"}, org="z-lab", family="qwen"))


# ---- a signed subscription without its secret -------------------------------------------------------------------

def test_a_signed_subscription_without_its_secret_stays_pending_with_the_reason(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'r.db'}")
    box = SecretBox(tmp_path / "secrets.json")
    secret = alerts.new_secret()
    with Receiver() as receiver:
        subscription = alerts.subscribe(store, box, receiver.url, secret=secret, allow_internal=True)
        _event(store, 1)
        box.delete(subscription.uid)  # lost: a restored backup, a hand edit, another machine's database
        report = alerts.deliver_pending(store, box, allow_internal=True)
        assert receiver.attempts == 0  # nothing sent unsigned
        assert (report.delivered, report.pending) == (0, 1)
        with store.session() as session:
            error = session.scalar(select(Delivery.last_error))
        assert error is not None and "signing secret missing" in error and subscription.uid in error
        # The secret back (and the retry due): delivered, signed.
        box.put(subscription.uid, secret)
        with store.session() as session:
            session.execute(update(Delivery).values(next_attempt_at=datetime.now(UTC) - timedelta(minutes=1)))
        report = alerts.deliver_pending(store, box, allow_internal=True)
        assert report.delivered == 1 and len(receiver.received) == 1
        assert alerts.verify(secret, receiver.received[0].headers, receiver.received[0].body)
    store.engine.dispose()


# ---- forty writers ------------------------------------------------------------------------------------------------

WRITER = """
import sys, time
from pathlib import Path
from registry.alerts.secrets import SecretBox
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
SecretBox(Path(sys.argv[1])).put(f"sub-{sys.argv[3]}", f"whsec_value-{sys.argv[3]}")
"""


def test_forty_concurrent_writers_keep_all_forty_secrets(tmp_path: Path) -> None:
    path, go = tmp_path / "home" / "secrets.json", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(go), str(i)], env=env)
               for i in range(WRITERS)]
    time.sleep(1.0)  # most of them are waiting at the gate by now
    go.touch()
    assert [w.wait(timeout=120) for w in writers] == [0] * WRITERS
    kept = json.loads(path.read_text())
    assert kept == {f"sub-{i}": f"whsec_value-{i}" for i in range(WRITERS)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(path.parent.glob("*.tmp"))  # no temporary file left behind


# ---- 0600 under umask 0 -------------------------------------------------------------------------------------------

def _umask_zero() -> None:
    os.umask(0)


def test_the_feed_is_0600_under_umask_zero(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"DRAFTERS_HOME": str(home)}
    for args in (("feed",), ("feed", "--out", str(tmp_path / "elsewhere" / "feed.xml"))):
        result = drafters(*args, env=env, preexec_fn=_umask_zero)
        assert result.returncode == 0, result.stderr
    for path in (home / "feed.atom", tmp_path / "elsewhere" / "feed.xml"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # A feed someone made readable is 0600 again after the next write.
    (home / "feed.atom").chmod(0o666)
    assert drafters("feed", env=env, preexec_fn=_umask_zero).returncode == 0
    assert stat.S_IMODE((home / "feed.atom").stat().st_mode) == 0o600


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("existing", [None, 0o666])
def test_the_dashboard_log_is_0600_under_umask_zero(tmp_path: Path, existing: int | None) -> None:
    home = tmp_path / "home"
    log = home / "dashboard.log"
    if existing is not None:
        home.mkdir(mode=0o700)
        log.write_text("an older run\n")
        log.chmod(existing)
    with running(["up", "--no-watch", "--no-worker", "--no-demo"], until="dashboard: http", preexec_fn=_umask_zero,
                 env={"DRAFTERS_HOME": str(home), "DRAFTERS_DASHBOARD_PORT": str(_free_port())}) as up:
        lines = up.lines
    assert any(line.startswith("dashboard:") for line in lines), lines
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
