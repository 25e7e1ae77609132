"""watcher cursors, webhook subscriptions and deliveries

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('subscription',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('uid', sa.String(length=40), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('event_types', sa.JSON(), nullable=False),
    sa.Column('org', sa.String(length=100), nullable=True),
    sa.Column('family', sa.String(length=100), nullable=True),
    sa.Column('repo', sa.String(length=200), nullable=True),
    sa.Column('has_secret', sa.Boolean(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('start_after_event_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscription')),
    sa.UniqueConstraint('uid', name=op.f('uq_subscription_uid'))
    )
    op.create_table('watch_cursor',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('org', sa.String(length=100), nullable=False),
    sa.Column('last_modified', sa.DateTime(timezone=True), nullable=True),
    sa.Column('polled_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('lease_owner', sa.String(length=100), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_watch_cursor')),
    sa.UniqueConstraint('org', name=op.f('uq_watch_cursor_org'))
    )
    op.create_table('delivery',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['event_id'], ['event.id'], name=op.f('fk_delivery_event_id_event'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subscription_id'], ['subscription.id'], name=op.f('fk_delivery_subscription_id_subscription'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_delivery')),
    sa.UniqueConstraint('subscription_id', 'event_id', name=op.f('uq_delivery_subscription_id_event_id'))
    )
    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_delivery_event_id'), ['event_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_delivery_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_delivery_subscription_id'), ['subscription_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('delivery', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_delivery_subscription_id'))
        batch_op.drop_index(batch_op.f('ix_delivery_status'))
        batch_op.drop_index(batch_op.f('ix_delivery_event_id'))

    op.drop_table('delivery')
    op.drop_table('watch_cursor')
    op.drop_table('subscription')
