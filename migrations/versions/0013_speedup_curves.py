"""speedup curves: one row per `drafters sweep` (a drafter's speedup at each concurrency on a user's server)

Revision ID: 0013_speedup_curves
Revises: 0012_verdict_levels
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_speedup_curves"
down_revision = "0012_verdict_levels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "speedup_curve",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=400), nullable=False),
        sa.Column("drafter", sa.String(length=400), nullable=True),
        sa.Column("engine", sa.String(length=40), nullable=False),
        sa.Column("engine_version", sa.String(length=200), nullable=True),
        sa.Column("hardware", sa.String(length=200), nullable=True),
        sa.Column("crossover", sa.Integer(), nullable=True),
        sa.Column("conditions", sa.JSON(), nullable=False),
        sa.Column("points", sa.JSON(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_speedup_curve")),
    )
    op.create_index(op.f("ix_speedup_curve_target"), "speedup_curve", ["target"])
    op.create_index(op.f("ix_speedup_curve_drafter"), "speedup_curve", ["drafter"])
    op.create_index(op.f("ix_speedup_curve_created_at"), "speedup_curve", ["created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_speedup_curve_created_at"), table_name="speedup_curve")
    op.drop_index(op.f("ix_speedup_curve_drafter"), table_name="speedup_curve")
    op.drop_index(op.f("ix_speedup_curve_target"), table_name="speedup_curve")
    op.drop_table("speedup_curve")
