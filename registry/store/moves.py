"""A repo moved on the Hub, for checkpoints and drafters alike: one record under the new id, the old id an alias,
and the runs stored under the old id moved to the new one (one history per record)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from registry.store.models import BenchmarkRun


def move_repo(session: Session, model: type[Any], alias_model: type[Any], alias_key: str, run_column: str,
              old_repo_id: str, new_repo_id: str) -> tuple[Any, bool] | None:
    """The row under the old id takes the new id (when the new id is recorded already, that duplicate goes: the
    history stays with the old row); `alias_model(alias=old, <alias_key>=row id)` remembers the old id; runs whose
    `run_column` names the old id follow. Returns the row now under the new id and whether it is the old row renamed, or None when
    neither id is recorded."""
    old = session.scalar(select(model).where(model.repo_id == old_repo_id))
    new = session.scalar(select(model).where(model.repo_id == new_repo_id))
    if new is None and old is None:
        return None
    renamed = old is not None and (new is None or old.id != new.id)
    if old is not None and new is not None and old.id != new.id:
        # Both recorded: the new id was read as a repo of its own before the move was seen. The old row holds the
        # history (revisions, verdicts, aliases): it stays, under the new id, and the duplicate goes; the next
        # read of the new id records its head as one more revision of the one record.
        session.delete(new)
        session.flush()
    if renamed:
        old.repo_id, new = new_repo_id, old
    session.flush()
    if session.scalar(select(alias_model).where(alias_model.alias == old_repo_id)) is None:
        session.add(alias_model(alias=old_repo_id, **{alias_key: new.id}))
    column = getattr(BenchmarkRun, run_column)
    session.execute(update(BenchmarkRun).where(column == old_repo_id).values({run_column: new_repo_id}))
    return new, renamed
