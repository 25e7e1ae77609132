"""benchmark runs, per-prompt-set results and verifier jobs

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('job',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=30), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('num_gpus', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sa.String(length=100), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('dedupe_key', sa.String(length=400), nullable=True),
    sa.Column('run_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job')),
    sa.UniqueConstraint('dedupe_key', name=op.f('uq_job_dedupe_key'))
    )
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_lease_expires_at'), ['lease_expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_job_status'), ['status'], unique=False)

    op.create_table('benchmark_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=40), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('failure_reason', sa.Text(), nullable=True),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('engine', sa.String(length=30), nullable=False),
    sa.Column('engine_version', sa.String(length=100), nullable=True),
    sa.Column('target', sa.String(length=300), nullable=False),
    sa.Column('target_revision', sa.String(length=80), nullable=True),
    sa.Column('drafter', sa.String(length=300), nullable=True),
    sa.Column('drafter_revision', sa.String(length=80), nullable=True),
    sa.Column('method', sa.String(length=30), nullable=True),
    sa.Column('draft_length', sa.Integer(), nullable=True),
    sa.Column('temperature', sa.Double(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('dtype', sa.String(length=20), nullable=True),
    sa.Column('device_name', sa.String(length=200), nullable=True),
    sa.Column('hardware', sa.String(length=200), nullable=True),
    sa.Column('torch_version', sa.String(length=40), nullable=True),
    sa.Column('transformers_version', sa.String(length=40), nullable=True),
    sa.Column('lossless', sa.Boolean(), nullable=True),
    sa.Column('tau', sa.Double(), nullable=True),
    sa.Column('acceptance_rate', sa.Double(), nullable=True),
    sa.Column('baseline_tokens_per_s', sa.Double(), nullable=True),
    sa.Column('tokens_per_s', sa.Double(), nullable=True),
    sa.Column('speedup', sa.Double(), nullable=True),
    sa.Column('efficiency', sa.Double(), nullable=True),
    sa.Column('peak_memory_bytes', sa.BigInteger(), nullable=True),
    sa.Column('target_weight_bytes', sa.BigInteger(), nullable=True),
    sa.Column('drafter_weight_bytes', sa.BigInteger(), nullable=True),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('provenance', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], name=op.f('fk_benchmark_run_job_id_job'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_benchmark_run')),
    sa.UniqueConstraint('run_id', name=op.f('uq_benchmark_run_run_id'))
    )
    with op.batch_alter_table('benchmark_run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_benchmark_run_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmark_run_drafter'), ['drafter'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmark_run_hardware'), ['hardware'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmark_run_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmark_run_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmark_run_target'), ['target'], unique=False)

    op.create_table('run_set_result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('prompt_set', sa.String(length=100), nullable=False),
    sa.Column('prompt_set_digest', sa.String(length=64), nullable=False),
    sa.Column('tau', sa.Double(), nullable=True),
    sa.Column('tau_spread', sa.Double(), nullable=True),
    sa.Column('acceptance_rate', sa.Double(), nullable=True),
    sa.Column('per_position_acceptance', sa.JSON(), nullable=False),
    sa.Column('baseline_tokens_per_s', sa.Double(), nullable=True),
    sa.Column('tokens_per_s', sa.Double(), nullable=True),
    sa.Column('speedup', sa.Double(), nullable=True),
    sa.Column('speedup_spread', sa.Double(), nullable=True),
    sa.Column('lossless', sa.Boolean(), nullable=True),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['benchmark_run.id'], name=op.f('fk_run_set_result_run_pk_benchmark_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_set_result')),
    sa.UniqueConstraint('run_pk', 'prompt_set', name=op.f('uq_run_set_result_run_pk_prompt_set'))
    )
    with op.batch_alter_table('run_set_result', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_set_result_prompt_set'), ['prompt_set'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_set_result_run_pk'), ['run_pk'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('run_set_result', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_set_result_run_pk'))
        batch_op.drop_index(batch_op.f('ix_run_set_result_prompt_set'))

    op.drop_table('run_set_result')
    with op.batch_alter_table('benchmark_run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_benchmark_run_target'))
        batch_op.drop_index(batch_op.f('ix_benchmark_run_status'))
        batch_op.drop_index(batch_op.f('ix_benchmark_run_job_id'))
        batch_op.drop_index(batch_op.f('ix_benchmark_run_hardware'))
        batch_op.drop_index(batch_op.f('ix_benchmark_run_drafter'))
        batch_op.drop_index(batch_op.f('ix_benchmark_run_created_at'))

    op.drop_table('benchmark_run')
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_status'))
        batch_op.drop_index(batch_op.f('ix_job_lease_expires_at'))

    op.drop_table('job')
