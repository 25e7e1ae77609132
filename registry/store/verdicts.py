"""Compatibility verdicts between head revisions: which pairs get one, and storing each (compat decides it)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from registry.domain import pair
from registry.domain.records import CompatRecord
from registry.store.checkpoints import find_checkpoint
from registry.store.core import NotFound, StoreCore, aware, utcnow
from registry.store.drafters import find_drafter
from registry.store.mappers import head_of, loads
from registry.store.models import Checkpoint, Compatibility, Drafter


class Verdicts:
    """Compatibility verdicts between head revisions, judged by registry.domain.pair."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def recompute_compatibility(
        self, *, drafter_repo_id: str | None = None, checkpoint_repo_id: str | None = None
    ) -> list[CompatRecord]:
        """Recompute verdicts between head revisions: for one drafter, one checkpoint, or everything."""
        with self.core.session() as session:
            pairs = self._candidate_pairs(session, drafter_repo_id, checkpoint_repo_id)
            return [self._store_verdict(session, drafter, checkpoint) for drafter, checkpoint in pairs]

    def _declared(self, session: Session, drafter: Drafter, *, named: bool = True) -> set[str]:
        """The drafter's recorded targets under their canonical ids; `named=False`: only the declared ones (a
        target its name implies is judged against, never declared)."""
        declared = set()
        for target in drafter.targets:
            if not named and target.declared_by not in pair.DECLARED_BY_METADATA:
                continue
            found = find_checkpoint(session, target.target_repo_id)
            declared.add(found.repo_id if found else target.target_repo_id)
        return declared

    def _candidate_pairs(
        self, session: Session, drafter_repo_id: str | None, checkpoint_repo_id: str | None
    ) -> list[tuple[Drafter, Checkpoint]]:
        """Pairs worth a verdict: declared targets, their derivatives, and checkpoints of the same width."""
        if drafter_repo_id is not None:
            drafter = find_drafter(session, drafter_repo_id)
            if drafter is None:
                raise NotFound(drafter_repo_id)
            drafters = [drafter]
        else:
            drafters = list(session.scalars(select(Drafter)))
        if checkpoint_repo_id is not None:
            checkpoint = find_checkpoint(session, checkpoint_repo_id)
            if checkpoint is None:
                raise NotFound(checkpoint_repo_id)
            checkpoints = [checkpoint]
        else:
            # Loaded with their revisions and bases in three queries, not two per checkpoint: a drafter found by
            # a Hub-wide query is compared with every checkpoint of a registry that has thousands.
            checkpoints = list(session.scalars(select(Checkpoint).options(
                selectinload(Checkpoint.revisions), selectinload(Checkpoint.bases))))
        pairs = []
        for drafter in drafters:
            drafter_head = head_of(drafter.revisions, drafter.head_sha)
            if drafter_head is None:
                continue
            declared = self._declared(session, drafter)
            width = drafter_head.hidden_size
            for checkpoint in checkpoints:
                if not checkpoint.revisions:
                    continue
                head = head_of(checkpoint.revisions, checkpoint.head_sha)
                related = checkpoint.repo_id in declared or any(b.base_repo_id in declared for b in checkpoint.bases)
                same_width = width is not None and head is not None and head.hidden_size == width
                if related or same_width:
                    pairs.append((drafter, checkpoint))
        return pairs

    def _store_verdict(self, session: Session, drafter: Drafter, checkpoint: Checkpoint) -> CompatRecord:
        drafter_head = head_of(drafter.revisions, drafter.head_sha)
        head = head_of(checkpoint.revisions, checkpoint.head_sha)
        result = pair.judge(
            pair.Side(config=loads(drafter_head.config_json), tokenizer_digest=drafter_head.tokenizer_digest,
                      repo_id=drafter.repo_id, method=drafter.method,
                      declared_targets=tuple(sorted(self._declared(session, drafter, named=False)))),
            pair.Side(config=loads(head.config_json), tokenizer_digest=head.tokenizer_digest,
                      repo_id=checkpoint.repo_id, problem=head.config_problem),
        )
        row = session.scalar(
            select(Compatibility).where(
                Compatibility.drafter_revision_id == drafter_head.id,
                Compatibility.checkpoint_revision_id == head.id,
            )
        )
        checks = pair.checks_json(result)
        if row is None:
            row = Compatibility(drafter_revision_id=drafter_head.id, checkpoint_revision_id=head.id)
            session.add(row)
        # An unchanged verdict keeps its row as it was, so rerunning converges to the same database.
        if (row.verdict, row.reasons, row.checks) != (result.verdict, list(result.reasons), checks):
            row.verdict, row.reasons, row.checks, row.checked_at = result.verdict, list(result.reasons), checks, utcnow()
        session.flush()
        return CompatRecord(
            drafter_repo_id=drafter.repo_id,
            drafter_sha=drafter_head.sha,
            method=drafter.method,
            checkpoint_repo_id=checkpoint.repo_id,
            checkpoint_sha=head.sha,
            verdict=row.verdict,
            reasons=tuple(row.reasons),
            checks=tuple(checks),
            checked_at=aware(row.checked_at),
            publisher=drafter.publisher,
        )
