"""an index on a run's hardware and time (issue 31): the pricing model fits a run's constants from the most
recent runs on its machine, read newest first through this index, so recording a run does not read every run the
machine ever stored

Revision ID: 0012_run_hardware_recent
Revises: 0011_predictions
"""

from __future__ import annotations

from alembic import op

revision = "0012_run_hardware_recent"
down_revision = "0011_predictions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_benchmark_run_hardware_recent", "benchmark_run", ["hardware", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_benchmark_run_hardware_recent", table_name="benchmark_run")
