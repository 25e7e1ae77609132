"""watch failures (quarantine) and service status

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('watch_failure',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_id', sa.String(length=200), nullable=False),
    sa.Column('org', sa.String(length=100), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=False),
    sa.Column('failed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_watch_failure')),
    sa.UniqueConstraint('repo_id', name=op.f('uq_watch_failure_repo_id'))
    )
    with op.batch_alter_table('watch_failure', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_watch_failure_org'), ['org'], unique=False)
    op.create_table('service_status',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('state', sa.String(length=40), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_success_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('last_error_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('restarts', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_service_status')),
    sa.UniqueConstraint('host', 'name', name=op.f('uq_service_status_host_name'))
    )


def downgrade() -> None:
    op.drop_table('service_status')
    with op.batch_alter_table('watch_failure', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_watch_failure_org'))
    op.drop_table('watch_failure')
