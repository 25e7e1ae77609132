"""The schema changes only through migrations, and the migrations match the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from registry.store import db
from registry.store.models import Base


def test_one_head() -> None:
    script = ScriptDirectory.from_config(db._alembic_config(db.make_engine("sqlite://")))
    assert len(script.get_heads()) == 1
    assert db.head_revision() == script.get_current_head()


def test_upgrade_to_head_then_down_to_empty(database_url: str) -> None:
    engine = db.make_engine(database_url)
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    tables = set(inspect(engine).get_table_names())
    assert {"checkpoint", "checkpoint_revision", "drafter", "drafter_revision", "compatibility", "event"} <= tables
    db.downgrade(engine, "base")
    assert db.current_revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    engine.dispose()


def test_models_match_migrations(database_url: str) -> None:
    """The equivalent of `alembic check`: autogenerate finds nothing to add after upgrading to head."""
    engine = db.make_engine(database_url)
    db.upgrade(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def test_open_database_upgrades_a_new_file(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'r.db'}"
    engine = db.open_database(url)
    assert db.current_revision(engine) == db.head_revision()
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_bad_database_urls_are_one_line_errors(tmp_path) -> None:
    import pytest

    for url in ("not a url", "nosuchdialect://x/y", "postgresql+psycopg://nobody:pw@127.0.0.1:1/none"):
        with pytest.raises(db.DatabaseError) as info:
            db.open_database(url)
        assert "\n" not in str(info.value).strip()
