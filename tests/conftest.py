"""Fixtures shared by the whole suite: isolated settings and real databases (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# huggingface_hub reads these once, at import: set them before anything imports it.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.pop("HF_HUB_OFFLINE", None)

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.engine import make_url

from registry.settings import get_settings
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub

if TYPE_CHECKING:
    from registry.store import Store

# The tiny real models (built once, cached) every test folder shares.
pytest_plugins = ["tests.tiny_models"]

REPO_ROOT = Path(__file__).resolve().parent.parent
# The server tests/services.sh starts; override to use another one.
PG_ADMIN_URL = os.environ.get(
    "DRAFTERS_TEST_PG_URL", "postgresql+psycopg://drafters:drafters@127.0.0.1:5432/postgres"
)


@pytest.fixture
def scenario() -> Scenario:
    """The standard Hub timeline (tests/fakehub/scenario.py), at day 0."""
    return Scenario.standard()


@pytest.fixture
def hub(scenario: Scenario) -> Iterator[FakeHub]:
    """A fake Hub (a real HTTP server on 127.0.0.1) serving the scenario's state as it advances."""
    with FakeHub(scenario.state) as server:
        yield server


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test sees the user's home, token or Hub cache."""
    home = tmp_path / "drafters-home"
    monkeypatch.setenv("DRAFTERS_HOME", str(home))
    monkeypatch.delenv("DRAFTERS_DATABASE_URL", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("DRAFTERS_HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


def _create_pg_database() -> str:
    name = f"drafters_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - turned into one clear failure below
        admin.dispose()
        pytest.fail(
            f"PostgreSQL at {make_url(PG_ADMIN_URL).render_as_string()} is not reachable ({exc.__class__.__name__}); "
            "run `bash tests/services.sh` first"
        )
    admin.dispose()
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _drop_pg_database(url: str) -> None:
    name = make_url(url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        for attempt in range(20):
            try:
                with admin.connect() as connection:
                    connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                return
            except DBAPIError:
                # An autovacuum worker on the database belongs to the server, which our role may not terminate;
                # it finishes within moments.
                if attempt == 19:
                    raise
                time.sleep(0.25)
    finally:
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on each backend: every database test runs on SQLite and PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    url = _create_pg_database()
    try:
        yield url
    finally:
        _drop_pg_database(url)


@pytest.fixture
def db_env(database_url: str) -> dict[str, str]:
    """The environment that points a `drafters` process (tests/support/cli.py) at the test's database."""
    return {"DRAFTERS_DATABASE_URL": database_url}


@pytest.fixture
def store(database_url: str) -> Iterator["Store"]:
    from registry.store import Store

    opened = Store.open(database_url)
    try:
        yield opened
    finally:
        opened.engine.dispose()
