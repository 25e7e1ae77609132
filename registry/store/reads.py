"""Reads over checkpoints, drafters, their revisions and verdicts, as plain records."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from registry.domain.records import CheckpointRecord, CompatRecord, DrafterRecord, DrafterRevisionRecord, RevisionRecord
from registry.store.checkpoints import find_checkpoint
from registry.store.core import StoreCore, aware
from registry.store.lifecycle import CHECKPOINT, DRAFTER, RepoLifecycle
from registry.store.mappers import checkpoint_record, drafter_record
from registry.store.read_memo import ReadMemo
from registry.store.models import (
    Checkpoint,
    CheckpointAlias,
    CheckpointBase,
    CheckpointRevision,
    Compatibility,
    Drafter,
    DrafterRevision,
    WatchCursor,
)

# Cursor rows of the watcher's drafter tag queries are named tag:<tag> (registry/watch/classify.py): no org.
QUERY_ROW = "tag:"
_Read = TypeVar("_Read")


class Reads:
    """Checkpoints, drafters, their revisions and verdicts as records. With a `memo` (one data version: the API's
    snapshot), each drafter, its head revision and the trusted publishers are read once for the memo's lifetime."""

    def __init__(self, core: StoreCore, lifecycle: RepoLifecycle, memo: ReadMemo | None = None) -> None:
        self.core = core
        self.lifecycle = lifecycle
        self._memo = memo

    def _once(self, what: str, key: Hashable, read: Callable[[], _Read]) -> _Read:
        return read() if self._memo is None else self._memo.remembered(what, key, read)

    def get_checkpoint(self, repo_id: str) -> CheckpointRecord | None:
        return self.lifecycle.get_repo(CHECKPOINT, repo_id)

    def get_drafter(self, repo_id: str) -> DrafterRecord | None:
        return self._once("drafter", repo_id, lambda: self.lifecycle.get_repo(DRAFTER, repo_id))

    def checkpoints(self) -> list[CheckpointRecord]:
        with self.core.session() as session:
            query = select(Checkpoint).options(selectinload(Checkpoint.bases)).order_by(Checkpoint.repo_id)
            return [checkpoint_record(r) for r in session.scalars(query)]

    def drafters(self) -> list[DrafterRecord]:
        with self.core.session() as session:
            query = select(Drafter).options(selectinload(Drafter.targets)).order_by(Drafter.repo_id)
            return [drafter_record(r) for r in session.scalars(query)]

    def checkpoints_named(self, key: str) -> list[CheckpointRecord]:
        """Checkpoints whose repo name has this name key (`names.name_key`): one probe of the stored key's index,
        whatever the registry holds."""
        with self.core.session() as session:
            query = (select(Checkpoint).options(selectinload(Checkpoint.bases))
                     .where(Checkpoint.name_key == key).order_by(Checkpoint.repo_id))
            return [checkpoint_record(r) for r in session.scalars(query)]

    def derivatives(self, base_repo_id: str) -> list[CheckpointRecord]:
        """Checkpoints whose base_model relations name `base_repo_id` (finetunes, quantizations, adapters)."""
        with self.core.session() as session:
            query = select(Checkpoint).join(CheckpointBase).where(CheckpointBase.base_repo_id == base_repo_id)
            return [checkpoint_record(r) for r in session.scalars(query)]

    def checkpoints_with_head(self, sha: str) -> list[CheckpointRecord]:
        return self.lifecycle.repos_with_head(CHECKPOINT, sha)

    def head_revision(self, repo_id: str) -> RevisionRecord | None:
        return self.lifecycle.repo_head(CHECKPOINT, repo_id)

    def revisions(self, repo_id: str) -> list[RevisionRecord]:
        return self.lifecycle.repo_history(CHECKPOINT, repo_id)

    def drafter_head_revision(self, repo_id: str) -> DrafterRevisionRecord | None:
        return self._once("drafter head", repo_id, lambda: self.lifecycle.repo_head(DRAFTER, repo_id))

    def drafter_revisions(self, repo_id: str) -> list[DrafterRevisionRecord]:
        return self.lifecycle.repo_history(DRAFTER, repo_id)

    def verdicts(self, *, checkpoint_repo_id: str | None = None, drafter_repo_id: str | None = None,
                 heads_only: bool = True) -> list[CompatRecord]:
        """Stored verdicts, by default only between the current head revisions."""
        with self.core.session() as session:
            query = (
                select(Compatibility, DrafterRevision.sha, Drafter, CheckpointRevision.sha, Checkpoint.repo_id)
                .join(DrafterRevision, Compatibility.drafter_revision_id == DrafterRevision.id)
                .join(Drafter, DrafterRevision.drafter_id == Drafter.id)
                .join(CheckpointRevision, Compatibility.checkpoint_revision_id == CheckpointRevision.id)
                .join(Checkpoint, CheckpointRevision.checkpoint_id == Checkpoint.id)
            )
            if heads_only:
                # Every revision write moves head_sha, so the head is the revision whose sha it names.
                query = query.where(DrafterRevision.sha == Drafter.head_sha, CheckpointRevision.sha == Checkpoint.head_sha)
            if checkpoint_repo_id is not None:
                checkpoint = find_checkpoint(session, checkpoint_repo_id)
                if checkpoint is None:
                    return []
                query = query.where(Checkpoint.id == checkpoint.id)
            if drafter_repo_id is not None:
                query = query.where(Drafter.repo_id == drafter_repo_id)
            return [
                CompatRecord(
                    drafter_repo_id=drafter.repo_id,
                    drafter_sha=drafter_sha,
                    method=drafter.method,
                    checkpoint_repo_id=checkpoint_repo,
                    checkpoint_sha=checkpoint_sha,
                    verdict=row.verdict,
                    reasons=tuple(row.reasons),
                    checks=tuple(row.checks),
                    checked_at=aware(row.checked_at),
                    publisher=drafter.publisher,
                )
                for row, drafter_sha, drafter, checkpoint_sha, checkpoint_repo in session.execute(
                    query.order_by(Compatibility.id)
                )
            ]

    def trusted_publishers(self) -> frozenset[str]:
        """The publishers a user already relies on (domain/reliance.py): the orgs the loaded catalog lists (its
        drafters' publishers and its targets' orgs) and the orgs the watcher watches (by default the catalog's; an
        org is watched by choice), never an account found only by a tag query."""
        return self._once("trusted publishers", None, self._trusted_publishers)

    def _trusted_publishers(self) -> frozenset[str]:
        with self.core.session() as session:
            orgs = set(session.scalars(select(Drafter.publisher).where(Drafter.source == "catalog").distinct()))
            orgs |= set(session.scalars(select(Checkpoint.org).where(Checkpoint.source == "catalog").distinct()))
            orgs |= {org for org in session.scalars(select(WatchCursor.org)) if not org.startswith(QUERY_ROW)}
            return frozenset(orgs)

    def aliases(self) -> dict[str, str]:
        """Old repo id -> current repo id, for every renamed checkpoint."""
        with self.core.session() as session:
            rows = session.execute(select(CheckpointAlias.alias, Checkpoint.repo_id).join(Checkpoint))
            return {alias: repo_id for alias, repo_id in rows}

    def drafters_with_head(self, sha: str) -> list[DrafterRecord]:
        return self.lifecycle.repos_with_head(DRAFTER, sha)

    def needs_details(self, repo_id: str) -> bool:
        """True when the checkpoint's head revision was recorded from a listing only (its config never read)."""
        head = self.head_revision(repo_id)
        return head is not None and head.sha != "catalog" and head.config is None and head.config_problem is None

    def known_heads(self, org: str) -> dict[str, str | None]:
        """Repo id -> recorded head sha of every checkpoint and drafter of the org."""
        return self.org_repos(org)[0]

    def gone_repo_ids(self, org: str) -> set[str]:
        """Checkpoints and drafters of the org last found gone from the Hub (status "gone")."""
        return self.org_repos(org)[1]

    def org_repos(self, org: str) -> tuple[dict[str, str | None], set[str]]:
        """known_heads and gone_repo_ids of the org in one read of each table (the poller needs both)."""
        heads: dict[str, str | None] = {}
        gone: set[str] = set()
        with self.core.session() as session:
            rows = [*session.execute(select(Checkpoint.repo_id, Checkpoint.head_sha, Checkpoint.status)
                                     .where(Checkpoint.org == org)),
                    *session.execute(select(Drafter.repo_id, Drafter.head_sha, Drafter.status)
                                     .where(Drafter.repo_id.startswith(f"{org}/", autoescape=True)))]
            for repo_id, head, status in rows:
                heads[repo_id] = head
                if status == "gone":
                    gone.add(repo_id)
        return heads, gone
