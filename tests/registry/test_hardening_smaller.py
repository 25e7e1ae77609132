"""Smaller holes of hardening round 4 (item 9), each through the path a user or the Hub reaches.

Probes guarded here:
- `drafters serve --host 0.0.0.0` with no token, or with `DRAFTERS_API_TOKEN=""`: refused in one line (exit 2)
  unless `--allow-open`, which then says so on stderr; an empty token on loopback is said too
- a Hub parameter total ≥ 2^63 (beyond a 64-bit column): the repo is recorded with its parameter count unknown,
  not failed every poll until quarantine
- the read-only API/dashboard engine on SQLite: `PRAGMA query_only=OFF` on its connection does not let it write
  (the file is opened `mode=ro`)
- (the converter killed by a signal: tests/llamacpp/test_convert.py
  test_a_converter_killed_by_a_signal_says_so_and_is_retryable)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from registry.hub import HubClient
from registry.store import Store
from registry.store.read_only import open_read_only
from registry.watch.poller import Watcher
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub
from tests.support.cli import drafters, running


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    return {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_WATCHED_ORGS": '["Qwen"]',
            "DRAFTERS_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}"}


# ---- serve on a public address ----------------------------------------------------------------------------------

@pytest.mark.parametrize("token", [None, ""])
def test_serve_on_every_interface_without_a_token_is_refused(base_env: dict[str, str], token: str | None) -> None:
    env = {**base_env, **({"DRAFTERS_API_TOKEN": token} if token is not None else {})}
    result = drafters("serve", "--host", "0.0.0.0", "--port", "0", "--workers", "1", env=env,
                      drop=("DRAFTERS_API_TOKEN",) if token is None else (), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: refusing to serve on 0.0.0.0 without a token"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "listening" not in result.stdout
    assert ("set but empty" in result.stderr) == (token == "")


def test_serve_open_on_purpose_says_so(base_env: dict[str, str]) -> None:
    with running(["serve", "--host", "0.0.0.0", "--port", "0", "--workers", "1", "--allow-open"],
                 until="listening", env=base_env, drop=("DRAFTERS_API_TOKEN",)) as serve:
        pass
    assert "warning: the API on 0.0.0.0 is open to anyone" in serve.output, serve.output
    assert "listening on http://0.0.0.0:" in serve.output


def test_an_empty_token_on_loopback_is_said(base_env: dict[str, str]) -> None:
    with running(["serve", "--port", "0", "--workers", "1"], until="listening",
                 env={**base_env, "DRAFTERS_API_TOKEN": ""}) as serve:
        pass
    assert "warning: DRAFTERS_API_TOKEN is set but empty" in serve.output, serve.output


# ---- a parameter total beyond any column ------------------------------------------------------------------------

def test_a_parameter_total_beyond_64_bits_is_unknown_not_a_failure_every_poll(store: Store, scenario: Scenario,
                                                                           hub: FakeHub, tmp_path: Path) -> None:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    watcher = Watcher(store, client, ["Qwen"])
    watcher.poll_once()  # the baseline: repos recorded from the listing alone
    # A new repo after the baseline is read in detail, its parameter total with it.
    files = dict(scenario.state.repo("Qwen/Qwen3-4B").files)
    scenario.state.add_repo("Qwen/Qwen3-4B-Huge", files=files, date=scenario.now, pipeline_tag="text-generation",
                            library_name="transformers", reported_parameters={"BF16": 2**63, "F32": 2**64})
    # The read every detailed path makes (a drafter's target, a new checkpoint's config): the total is unknown.
    assert client.revision("Qwen/Qwen3-4B-Huge").parameters is None
    for _ in range(2):
        report = watcher.poll_once()
        assert not report.errors, report.errors
    assert store.watch_state.watch_failures() == []
    head = store.reads.head_revision("Qwen/Qwen3-4B-Huge")
    assert head is not None and head.parameter_count is None  # unknown, not 0 and not a wrapped number


# ---- the read-only engine ---------------------------------------------------------------------------------------

def test_the_read_only_sqlite_engine_cannot_be_switched_to_writing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    Store.open(url).engine.dispose()
    engine = open_read_only(url)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM event")).scalar() == 0
            connection.execute(text("PRAGMA query_only=OFF"))  # what a bug or an injected statement could run
            with pytest.raises(Exception, match="(?i)readonly|read-only|read only"):
                connection.execute(text("INSERT INTO alembic_version (version_num) VALUES ('x')"))
                connection.commit()
    finally:
        engine.dispose()
    assert not (tmp_path / "elsewhere.db").exists()
    with pytest.raises(Exception, match="no registry database"):
        open_read_only(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    assert not (tmp_path / "elsewhere.db").exists()  # never created by a reader
