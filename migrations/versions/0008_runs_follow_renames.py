"""runs follow renames: a run stored under a repo's old id moves to its current id; no schema change

Renamed drafters' runs have followed the rename since 0006, and renamed checkpoints' since this revision; runs
stored under an old id before then (by a job queued before the move, or before the rule) are moved here. Not
undone on downgrade: the old code finds a drafter's runs by its current id as well, and an old id stays an alias.

Revision ID: 0008_runs_follow_renames
Revises: 0007_run_measurement_json
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_runs_follow_renames"
down_revision = "0007_run_measurement_json"
branch_labels = None
depends_on = None

runs = sa.table("benchmark_run", sa.column("target", sa.String), sa.column("drafter", sa.String))
checkpoints = sa.table("checkpoint", sa.column("id", sa.Integer), sa.column("repo_id", sa.String))
checkpoint_aliases = sa.table("checkpoint_alias", sa.column("alias", sa.String), sa.column("checkpoint_id", sa.Integer))
drafters = sa.table("drafter", sa.column("id", sa.Integer), sa.column("repo_id", sa.String))
drafter_aliases = sa.table("drafter_alias", sa.column("alias", sa.String), sa.column("drafter_id", sa.Integer))


def upgrade() -> None:
    connection = op.get_bind()
    moves = connection.execute(sa.select(checkpoint_aliases.c.alias, checkpoints.c.repo_id).join(
        checkpoints, checkpoints.c.id == checkpoint_aliases.c.checkpoint_id)).all()
    for alias, current in moves:
        if alias != current:
            connection.execute(runs.update().where(runs.c.target == alias).values(target=current))
    moves = connection.execute(sa.select(drafter_aliases.c.alias, drafters.c.repo_id).join(
        drafters, drafters.c.id == drafter_aliases.c.drafter_id)).all()
    for alias, current in moves:
        if alias != current:
            connection.execute(runs.update().where(runs.c.drafter == alias).values(drafter=current))


def downgrade() -> None:
    pass  # see the docstring: moving runs back to an old id would split one history again
