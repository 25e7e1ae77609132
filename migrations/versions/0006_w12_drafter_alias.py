"""drafter aliases: a renamed drafter repo stays one drafter

Revision ID: 0006_w12_drafter_alias
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_w12_drafter_alias"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('drafter_alias',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('alias', sa.String(length=200), nullable=False),
    sa.Column('drafter_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['drafter_id'], ['drafter.id'], name=op.f('fk_drafter_alias_drafter_id_drafter'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_drafter_alias')),
    sa.UniqueConstraint('alias', name=op.f('uq_drafter_alias_alias'))
    )
    with op.batch_alter_table('drafter_alias', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_drafter_alias_drafter_id'), ['drafter_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('drafter_alias', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_drafter_alias_drafter_id'))

    op.drop_table('drafter_alias')
