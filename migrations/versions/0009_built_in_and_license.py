"""built-in drafters and licenses: a checkpoint's in-checkpoint drafting methods, a drafter's license and its
in-place replacements

Revision ID: 0009_built_in_and_license
Revises: 0008_runs_follow_renames
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_built_in_and_license"
down_revision = "0008_runs_follow_renames"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoint", schema=None) as batch_op:
        batch_op.add_column(sa.Column("built_in", sa.String(length=100), nullable=True))
    with op.batch_alter_table("drafter", schema=None) as batch_op:
        batch_op.add_column(sa.Column("license", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("replaced_in_place", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("drafter", schema=None) as batch_op:
        batch_op.drop_column("replaced_in_place")
        batch_op.drop_column("license")
    with op.batch_alter_table("checkpoint", schema=None) as batch_op:
        batch_op.drop_column("built_in")
