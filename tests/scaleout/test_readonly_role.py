"""The dashboard's read-only PostgreSQL role: it reads every registry table (later ones too) and writes nothing;
its password is never printed, and bad input gets a one-line error."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from dashboard import queries
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.roles import RoleError, create_readonly_role
from tests.support.cli import drafters as run_drafters

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-" + uuid.uuid4().hex  # unique, so finding it in any output means it leaked
postgres_only = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def drafters(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_drafters(*args, env=env, cwd=REPO_ROOT)


def as_role(database_url: str, name: str, password: str) -> str:
    return make_url(database_url).set(username=name, password=password).render_as_string(hide_password=False)


@pytest.fixture
def role_name(store: Store) -> Iterator[str]:
    """A fresh role name; the role (roles are cluster-wide) is dropped after the test."""
    name = f"ro_{uuid.uuid4().hex[:12]}"
    yield name
    with store.engine.begin() as connection:
        if connection.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}):
            # DROP OWNED (its grants here and on the database) needs membership in the role.
            connection.execute(text(f'GRANT "{name}" TO CURRENT_USER'))
            connection.execute(text(f'DROP OWNED BY "{name}"'))
            connection.execute(text(f'DROP ROLE "{name}"'))


def denied(connection, statement: str) -> str:  # type: ignore[no-untyped-def]
    """Run a statement that must fail; return the server's reason."""
    with pytest.raises(DBAPIError) as raised:
        with connection.begin():
            connection.execute(text(statement))
    return str(raised.value.orig)


@pytest.mark.postgres
@postgres_only
def test_readonly_role_reads_every_table_and_writes_nothing(store: Store, database_url: str, role_name: str) -> None:
    store.events.record_event(EventSpec(type="new_checkpoint", subject="Qwen/Qwen3-8B", dedupe_key="k1",
                                 payload={"message": "m"}, org="Qwen", family="qwen3"))
    made = drafters("db", "readonly-role", role_name, "--password-env", "DASHBOARD_PASSWORD",
                    env={"DRAFTERS_DATABASE_URL": database_url, "DASHBOARD_PASSWORD": PASSWORD})
    assert made.returncode == 0, made.stderr
    assert f"role {role_name} created" in made.stdout
    assert PASSWORD not in made.stdout + made.stderr

    url = as_role(database_url, role_name, PASSWORD)
    # The dashboard's way in: schema current, reads answer.
    dashboard = queries.ReadOnlyQueries(url)
    try:
        assert dashboard.schema_problem() is None
        assert queries.counts(dashboard) is not None
    finally:
        dashboard.close()
    # The registry's own reads work on it too, through the ordinary store.
    reader = Store.open(url)
    try:
        assert [e.subject for e in reader.events.events()] == ["Qwen/Qwen3-8B"]
    finally:
        reader.engine.dispose()

    # A table a later migration adds (created by the owner, as migrations are) is readable without a new grant.
    with store.engine.begin() as connection:
        connection.execute(text("CREATE TABLE later_table (id integer primary key)"))
        connection.execute(text("INSERT INTO later_table VALUES (1)"))

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT count(*) FROM event")) == 1
            assert connection.scalar(text("SELECT id FROM later_table")) == 1
            connection.rollback()
            # Sessions start read-only...
            assert "read-only transaction" in denied(connection, "INSERT INTO later_table VALUES (2)")
            # ...and a session that turns that off still has no right to write anything.
            connection.execute(text("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"))
            connection.commit()
            for statement in ("INSERT INTO later_table VALUES (2)", "UPDATE event SET subject = 'x'",
                              "DELETE FROM job", "DROP TABLE event", "CREATE TABLE mine (id integer)",
                              "ALTER TABLE event ADD COLUMN x integer"):
                reason = denied(connection, statement)
                assert "permission denied" in reason or "must be owner" in reason, (statement, reason)
    finally:
        engine.dispose()
    assert [e.subject for e in store.events.events()] == ["Qwen/Qwen3-8B"]


@pytest.mark.postgres
@postgres_only
def test_running_it_again_renews_the_password(store: Store, database_url: str, role_name: str) -> None:
    first = create_readonly_role(store.engine, role_name, PASSWORD)
    second = create_readonly_role(store.engine, role_name, PASSWORD + "-new")
    assert (first.created, second.created) == (True, False)
    with pytest.raises(OperationalError, match="password authentication failed"):
        create_engine(as_role(database_url, role_name, PASSWORD)).connect()
    engine = create_engine(as_role(database_url, role_name, PASSWORD + "-new"))
    try:
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT count(*) FROM job")) == 0
    finally:
        engine.dispose()


@pytest.mark.postgres
@postgres_only
def test_bad_requests_get_one_line_errors_and_change_nothing(store: Store, database_url: str,
                                                             role_name: str) -> None:
    owner = make_url(database_url).username
    for name, password, reason in [
        ("Robert'); DROP TABLE job; --", PASSWORD, "must be lowercase letters"),
        (role_name, "", "password is empty"),
        (owner, PASSWORD, "the role this command runs as"),
    ]:
        with pytest.raises(RoleError, match=reason) as raised:
            create_readonly_role(store.engine, name, password)  # type: ignore[arg-type]
        assert "\n" not in str(raised.value) and PASSWORD not in str(raised.value)
    with store.engine.connect() as connection:
        assert connection.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": role_name}) is None
        assert connection.scalar(text("SELECT count(*) FROM job")) == 0

    unset = drafters("db", "readonly-role", role_name, "--password-env", "NOT_SET_ANYWHERE",
                     env={"DRAFTERS_DATABASE_URL": database_url})
    assert unset.returncode == 2
    assert "NOT_SET_ANYWHERE is not set" in unset.stderr and "Traceback" not in unset.stderr


def test_sqlite_has_no_roles(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        with pytest.raises(RoleError, match="need PostgreSQL"):
            create_readonly_role(store.engine, "dashboard", PASSWORD)
    finally:
        store.engine.dispose()
