"""a checkpoint's name key, stored and indexed (issue 31): a drafter that declares no target finds the checkpoints
its name implies by one index probe, not by a LIKE over every repo id; the lower(repo_id) index of 0014 goes (its
one reader, the exact-before read it served, reads the named targets' verdicts by id now)

The key is names.name_key of the repo's name, computed here for the rows already stored, as the store computes it
for each row it writes.

Revision ID: 0016_checkpoint_name_key
Revises: 0015_curve_job
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from registry.domain import names

revision = "0016_checkpoint_name_key"
down_revision = "0015_curve_job"
branch_labels = None
depends_on = None

_BATCH = 5000


def upgrade() -> None:
    # Added nullable in place (no table copy on SQLite, whose copy would cascade-delete the checkpoint's rows).
    op.add_column("checkpoint", sa.Column("name_key", sa.String(length=200), nullable=True))
    checkpoint = sa.table("checkpoint", sa.column("id", sa.Integer()), sa.column("repo_id", sa.String()),
                          sa.column("name_key", sa.String()))
    connection = op.get_bind()
    rows = connection.execute(sa.select(checkpoint.c.id, checkpoint.c.repo_id)).all()
    update = (sa.update(checkpoint).where(checkpoint.c.id == sa.bindparam("row_id"))
              .values(name_key=sa.bindparam("key")))
    for start in range(0, len(rows), _BATCH):
        connection.execute(update, [{"row_id": row_id, "key": names.name_key(repo_id)}
                                    for row_id, repo_id in rows[start:start + _BATCH]])
    op.create_index("ix_checkpoint_name_key", "checkpoint", ["name_key"])
    op.drop_index("ix_checkpoint_repo_id_lower", table_name="checkpoint")


def downgrade() -> None:
    op.create_index("ix_checkpoint_repo_id_lower", "checkpoint", [sa.text("lower(repo_id)")])
    op.drop_index("ix_checkpoint_name_key", table_name="checkpoint")
    # In place too (SQLite has dropped columns since 3.35): a batch copy of the table would lose its rows' children.
    op.drop_column("checkpoint", "name_key")
