"""A comparable picture of a whole database: every table's rows without surrogate ids and clock readings."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, MetaData, select

VOLATILE_SUFFIXES = ("_at", "_id", "_pk")
VOLATILE_NAMES = {"id", "first_seen", "uid", "run_id", "lease_owner"}


def snapshot(engine: Engine, *, skip_tables: tuple[str, ...] = ("alembic_version",)) -> dict[str, list[str]]:
    metadata = MetaData()
    metadata.reflect(engine)
    picture: dict[str, list[str]] = {}
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            if table.name in skip_tables:
                continue
            columns = [
                c for c in table.columns if c.name not in VOLATILE_NAMES and not c.name.endswith(VOLATILE_SUFFIXES)
            ]
            rows: list[str] = []
            for row in connection.execute(select(*columns)):
                values: dict[str, Any] = dict(zip([c.name for c in columns], row, strict=True))
                rows.append(json.dumps(values, sort_keys=True, default=str))
            picture[table.name] = sorted(rows)
    return picture
