"""One lifecycle for the two kinds of repo the registry follows on the Hub, checkpoints and drafters.

Either is one row found under its repo id or an old id (an alias); records a revision once per sha, the newest its
head; carries a status (ok, gated, gone); moves to a new id keeping one record, its old id an alias and its runs
following; and reads back its head and its history. The kinds differ only in data (`RepoKind`: their tables, the
run column that names them, their records) and in what a revision's config says of them (the caller's `fill`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from registry.domain import names
from registry.domain.records import CheckpointRecord, DrafterRecord, DrafterRevisionRecord, RevisionRecord, RevisionSpec
from registry.store.core import NotFound, StoreCore, utcnow
from registry.store.mappers import checkpoint_record, drafter_record, drafter_revision_record, head_of, revision_record
from registry.store.models import (
    BenchmarkRun,
    Checkpoint,
    CheckpointAlias,
    CheckpointRevision,
    Drafter,
    DrafterAlias,
    DrafterRevision,
)

_Record = TypeVar("_Record", CheckpointRecord, DrafterRecord)
_RevisionRecord = TypeVar("_RevisionRecord", RevisionRecord, DrafterRevisionRecord)


@dataclass(frozen=True)
class RepoKind(Generic[_Record, _RevisionRecord]):
    """Where one kind of repo lives: its table, its aliases and revisions (each naming the row by `owner`), the
    run column that names it, the column a move to another org changes, and the records callers get."""

    name: str
    table: type[Any]
    alias: type[Any]
    alias_owner: Any  # the alias table's column naming the row
    revision: type[Any]
    revision_owner: Any  # the revision table's column naming the row
    run_column: Any  # the BenchmarkRun column that names the repo
    org_column: Any  # set to the new org on a move to another org (the watcher reads heads and vanished repos by org)
    record: Callable[[Any], _Record]
    revision_record: Callable[[str, Any], _RevisionRecord]


CHECKPOINT: RepoKind[CheckpointRecord, RevisionRecord] = RepoKind(
    name="checkpoint", table=Checkpoint, alias=CheckpointAlias, alias_owner=CheckpointAlias.checkpoint_id,
    revision=CheckpointRevision, revision_owner=CheckpointRevision.checkpoint_id, run_column=BenchmarkRun.target,
    org_column=Checkpoint.org, record=checkpoint_record, revision_record=revision_record)
DRAFTER: RepoKind[DrafterRecord, DrafterRevisionRecord] = RepoKind(
    name="drafter", table=Drafter, alias=DrafterAlias, alias_owner=DrafterAlias.drafter_id,
    revision=DrafterRevision, revision_owner=DrafterRevision.drafter_id, run_column=BenchmarkRun.drafter,
    org_column=Drafter.publisher, record=drafter_record, revision_record=drafter_revision_record)
# By name; a repo id is looked up as a checkpoint first (the order here), as every reader has done.
KINDS: dict[str, RepoKind[Any, Any]] = {kind.name: kind for kind in (CHECKPOINT, DRAFTER)}


def find(session: Session, kind: RepoKind[Any, Any], repo_id: str) -> Any | None:
    """The row recorded under `repo_id`, or under the id it was renamed to (its alias); None when neither."""
    found = session.scalar(select(kind.table).where(kind.table.repo_id == repo_id))
    if found is not None:
        return found
    owner = session.scalar(select(kind.alias_owner).where(kind.alias.alias == repo_id))
    return session.get(kind.table, owner) if owner is not None else None


def found(session: Session, kind: RepoKind[Any, Any], repo_id: str) -> Any:
    row = find(session, kind, repo_id)
    if row is None:
        raise NotFound(repo_id)
    return row


def set_status(session: Session, kind: RepoKind[Any, Any], repo_id: str, status: str, detail: str | None) -> None:
    row = found(session, kind, repo_id)
    row.status, row.status_detail = status, detail
    if status == "gated":
        row.gated = True


def add_revision(session: Session, kind: RepoKind[Any, Any], owner: Any, spec: RevisionSpec, *,
                 fill: Callable[[Any], None], refill: Callable[[Any], bool]) -> tuple[Any, bool]:
    """Record the revision `spec` of `owner` once and make it the head; True when it is new. One sha is one
    content: a second read of a stored sha changes nothing, unless `refill(stored)` says the stored one lacks what
    this read has (a listing-only or catalog revision read from the Hub now); then `fill` completes it."""
    existing = session.scalar(
        select(kind.revision).where(kind.revision_owner == owner.id, kind.revision.sha == spec.sha))
    owner.head_sha = spec.sha
    if existing is not None:
        if refill(existing):
            fill(existing)
        return existing, False
    row = kind.revision(sha=spec.sha, seen_at=utcnow(), **{kind.revision_owner.key: owner.id})
    fill(row)
    session.add(row)
    return row, True


def move(session: Session, kind: RepoKind[Any, Any], old_repo_id: str, new_repo_id: str) -> None:
    """A repo moved on the Hub: the row under the old id takes the new id (when the new id is recorded already,
    that duplicate goes: the history stays with the old row), the old id becomes an alias, runs that name the old
    id follow, and the row's org is the new id's."""
    old = session.scalar(select(kind.table).where(kind.table.repo_id == old_repo_id))
    new = session.scalar(select(kind.table).where(kind.table.repo_id == new_repo_id))
    if new is None and old is None:
        return
    renamed = old is not None and (new is None or old.id != new.id)
    if old is not None and new is not None and old.id != new.id:
        # Both recorded: the new id was read as a repo of its own before the move was seen. The old row holds the
        # history (revisions, verdicts, aliases): it stays, under the new id, and the duplicate goes; the next
        # read of the new id records its head as one more revision of the one record.
        session.delete(new)
        session.flush()
    if renamed:
        old.repo_id = new_repo_id
        setattr(old, kind.org_column.key, new_repo_id.split("/", 1)[0])
        if isinstance(old, Checkpoint):  # its name-implied drafters find it under the name it has now
            old.name_key = names.name_key(new_repo_id)
        new = old
    session.flush()
    if session.scalar(select(kind.alias).where(kind.alias.alias == old_repo_id)) is None:
        session.add(kind.alias(alias=old_repo_id, **{kind.alias_owner.key: new.id}))
    session.execute(update(BenchmarkRun).where(kind.run_column == old_repo_id).values({kind.run_column: new_repo_id}))


class RepoLifecycle:
    """The lifecycle as store commands and reads, each in its own session (one transaction inside a unit)."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def get_repo(self, kind: RepoKind[_Record, Any], repo_id: str) -> _Record | None:
        with self.core.session() as session:
            row = find(session, kind, repo_id)
            return kind.record(row) if row else None

    def set_repo_status(self, kind: RepoKind[Any, Any], repo_id: str, status: str, detail: str | None = None) -> None:
        with self.core.session() as session:
            set_status(session, kind, repo_id, status, detail)

    def move_repo(self, kind: RepoKind[Any, Any], old_repo_id: str, new_repo_id: str) -> None:
        """A repo moved on the Hub: keep one record (and its runs) under the new id and remember the old one."""
        with self.core.session() as session:
            move(session, kind, old_repo_id, new_repo_id)

    def repo_head(self, kind: RepoKind[Any, _RevisionRecord], repo_id: str) -> _RevisionRecord | None:
        with self.core.session() as session:
            row = find(session, kind, repo_id)
            head = head_of(row.revisions, row.head_sha) if row else None
            return kind.revision_record(row.repo_id, head) if head is not None and row is not None else None

    def repo_history(self, kind: RepoKind[Any, _RevisionRecord], repo_id: str) -> list[_RevisionRecord]:
        """Every recorded revision of the repo, oldest first; [] when it is not recorded."""
        with self.core.session() as session:
            row = find(session, kind, repo_id)
            if row is None:
                return []
            return [kind.revision_record(row.repo_id, r) for r in sorted(row.revisions, key=lambda r: r.id)]

    def repos_with_head(self, kind: RepoKind[_Record, Any], sha: str) -> list[_Record]:
        with self.core.session() as session:
            return [kind.record(r) for r in session.scalars(select(kind.table).where(kind.table.head_sha == sha))]
