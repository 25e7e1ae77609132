"""an index on a run's hardware and time (issue 31): the pricing model fits a run's constants from the most
recent runs on its machine, read newest first through this index, so recording a run does not read every run the
machine ever stored; an index on a checkpoint's lower-cased repo id, so a new drafter's declared targets (matched
whatever their case) are found without reading every checkpoint

Revision ID: 0014_run_hardware_recent
Revises: 0013_speedup_curves
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_run_hardware_recent"
down_revision = "0013_speedup_curves"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_benchmark_run_hardware_recent", "benchmark_run", ["hardware", "created_at"])
    op.create_index("ix_checkpoint_repo_id_lower", "checkpoint", [sa.text("lower(repo_id)")])


def downgrade() -> None:
    op.drop_index("ix_checkpoint_repo_id_lower", table_name="checkpoint")
    op.drop_index("ix_benchmark_run_hardware_recent", table_name="benchmark_run")
