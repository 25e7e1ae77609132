"""index checkpoint head sha

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 20:30:42.527057
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('checkpoint', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_checkpoint_head_sha'), ['head_sha'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('checkpoint', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_checkpoint_head_sha'))

