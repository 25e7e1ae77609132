"""autoverify: job capability needs, workers with capabilities, the download ledger, revisions' license tags

Revision ID: 0010_autoverify
Revises: 0009_built_in_and_license
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_autoverify"
down_revision = "0009_built_in_and_license"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("checkpoint_revision", "drafter_revision"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("license", sa.String(length=100), nullable=True))
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.add_column(sa.Column("memory_bytes", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("engine", sa.String(length=30), nullable=True))
    op.create_table(
        "worker",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=100), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("device", sa.String(length=200), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("engines", sa.JSON(), nullable=False),
        sa.Column("disk_budget_bytes", sa.BigInteger(), nullable=True),
        sa.Column("has_token", sa.Boolean(), nullable=False),
        sa.Column("run_bytes_per_parameter", sa.Double(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker")),
        sa.UniqueConstraint("worker_id", name=op.f("uq_worker_worker_id")),
    )
    with op.batch_alter_table("worker", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_worker_heartbeat_at"), ["heartbeat_at"], unique=False)
    op.create_table(
        "download",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo_id", sa.String(length=200), nullable=False),
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=True),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_download")),
        sa.UniqueConstraint("repo_id", "revision", name=op.f("uq_download_repo_id_revision")),
    )
    with op.batch_alter_table("download", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_download_repo_id"), ["repo_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_download_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_download_last_used_at"), ["last_used_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("download", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_download_last_used_at"))
        batch_op.drop_index(batch_op.f("ix_download_status"))
        batch_op.drop_index(batch_op.f("ix_download_repo_id"))
    op.drop_table("download")
    with op.batch_alter_table("worker", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_worker_heartbeat_at"))
    op.drop_table("worker")
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.drop_column("engine")
        batch_op.drop_column("memory_bytes")
    for table in ("drafter_revision", "checkpoint_revision"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("license")
