"""the curve job that measured a speedup curve (issue 34): a retried job finds the curves it already stored and
measures only the rest, so a rerun converges with no duplicate curves

Revision ID: 0015_curve_job
Revises: 0014_run_hardware_recent
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_curve_job"
down_revision = "0014_run_hardware_recent"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("speedup_curve") as batch:
        batch.add_column(sa.Column("job_id", sa.Integer(), nullable=True))
        batch.create_index("ix_speedup_curve_job_id", ["job_id"])


def downgrade() -> None:
    with op.batch_alter_table("speedup_curve") as batch:
        batch.drop_index("ix_speedup_curve_job_id")
        batch.drop_column("job_id")
