"""run predictions in their own table: the pricing model's forecast of a run moves out of the run's metrics JSON;
an index on a run's series (target, drafter, hardware, created_at) for the regression check

The prediction is rewritten whenever the model is recalibrated while the measurement never changes, so it gets its
own row (one per run); existing predictions move over unchanged and move back on downgrade.

Revision ID: 0011_predictions
Revises: 0010_autoverify
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011_predictions"
down_revision = "0010_autoverify"
branch_labels = None
depends_on = None

runs = sa.table("benchmark_run", sa.column("id", sa.Integer), sa.column("metrics", sa.JSON))
predictions = sa.table("run_prediction", sa.column("run_pk", sa.Integer), sa.column("model_version", sa.Integer),
                       sa.column("prediction", sa.JSON))


def upgrade() -> None:
    op.create_table(
        "run_prediction",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("model_version", sa.Integer(), nullable=False),
        sa.Column("prediction", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["benchmark_run.id"], name=op.f("fk_run_prediction_run_pk_benchmark_run"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_prediction")),
        sa.UniqueConstraint("run_pk", name=op.f("uq_run_prediction_run_pk")),
    )
    # A run's series, for the regression check's newest comparable runs (one index walk, not the whole table).
    op.create_index("ix_benchmark_run_series", "benchmark_run", ["target", "drafter", "hardware", "created_at"])
    connection = op.get_bind()
    for rows in _pages(connection):
        moved: list[dict[str, Any]] = []
        for pk, metrics in rows:
            if not isinstance(metrics, dict) or "prediction" not in metrics:
                continue
            prediction = metrics.pop("prediction")
            connection.execute(runs.update().where(runs.c.id == pk).values(metrics=metrics))
            if isinstance(prediction, dict):
                moved.append({"run_pk": pk, "model_version": int(prediction.get("model_version") or 0),
                              "prediction": prediction})
        if moved:
            connection.execute(predictions.insert(), moved)


def _pages(connection: sa.Connection, size: int = 1000) -> Iterator[list[tuple[int, Any]]]:
    """The runs' (id, metrics) a thousand at a time, by id: a registry of 100,000 runs is never all in memory."""
    last = 0
    while True:
        rows = [(pk, metrics) for pk, metrics in connection.execute(
            sa.select(runs.c.id, runs.c.metrics).where(runs.c.id > last).order_by(runs.c.id).limit(size))]
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def downgrade() -> None:
    connection = op.get_bind()
    stored = dict(connection.execute(sa.select(predictions.c.run_pk, predictions.c.prediction)).all())
    query = sa.select(runs.c.id, runs.c.metrics).where(runs.c.id.in_(list(stored)))
    for pk, metrics in connection.execute(query).all():
        metrics = {**(metrics if isinstance(metrics, dict) else {}), "prediction": stored[pk]}
        connection.execute(runs.update().where(runs.c.id == pk).values(metrics=metrics))
    op.drop_table("run_prediction")
    op.drop_index("ix_benchmark_run_series", table_name="benchmark_run")
