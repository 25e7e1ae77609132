"""verdict levels that say what was checked (issue 28): a stored "exact" is "declared" until it is recomputed

Before this revision a pair was stored "exact" when it was declared, even by its repo name alone, with nothing
checked. No migration can tell which of those stored rows the new rules keep exact (that takes the configs and the
rules in registry/domain/compat.py), so every stored "exact" becomes "declared", with a first reason that says why,
and the next recompute (`drafters up` and `drafters catalog load` recompute every pair; `find`, `launch` and the
watcher the pairs they touch) writes the verdict the rules give. Nothing is called exact unchecked meanwhile. The
column is a plain string (no enum or check constraint), so the schema itself does not change. Downgrade: the old
code knows no "declared", so those rows read "exact" again, without the added reason.

Revision ID: 0012_verdict_levels
Revises: 0011_predictions
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012_verdict_levels"
down_revision = "0011_predictions"
branch_labels = None
depends_on = None

STALE = "stored as exact before verdicts said what was checked: recomputed at the next catalog load, watch or find"

compatibility = sa.table("compatibility", sa.column("id", sa.Integer), sa.column("verdict", sa.String),
                         sa.column("reasons", sa.JSON))


def _rewrite(connection: sa.Connection, old: str, new: str, reasons: Any) -> None:
    rows = connection.execute(sa.select(compatibility.c.id, compatibility.c.reasons)
                              .where(compatibility.c.verdict == old)).all()
    for pk, stored in rows:
        connection.execute(compatibility.update().where(compatibility.c.id == pk)
                           .values(verdict=new, reasons=reasons(list(stored) if isinstance(stored, list) else [])))


def upgrade() -> None:
    _rewrite(op.get_bind(), "exact", "declared", lambda reasons: [STALE, *reasons])


def downgrade() -> None:
    _rewrite(op.get_bind(), "declared", "exact", lambda reasons: [r for r in reasons if r != STALE])
