"""Alembic environment: the engine comes from registry.db (programmatic runs) or from the -x url=... option."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from registry.settings import get_settings
from registry.store.models import Base

config = context.config
target_metadata = Base.metadata


def _engine():  # type: ignore[no-untyped-def]
    engine = config.attributes.get("engine")
    if engine is not None:
        return engine
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        url = get_settings().resolved_database_url
    return create_engine(url)


def run_migrations_online() -> None:
    engine = _engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things in place; batch mode copies the table.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
