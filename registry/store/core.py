"""The registry's one database: commands that write and the reads they need, over plain records."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from registry.domain import compat, configs, names
from registry.store.db import open_database, session_scope
from registry.store.models import (
    Checkpoint,
    CheckpointAlias,
    CheckpointBase,
    CheckpointRevision,
    Compatibility,
    Drafter,
    DrafterAlias,
    DrafterRevision,
    DrafterTarget,
    Event,
    ServiceStatus,
    WatchCursor,
    WatchFailure,
)
from registry.store.records import (
    CheckpointRecord,
    CheckpointSpec,
    CompatRecord,
    DrafterRecord,
    DrafterRevisionRecord,
    DrafterSpec,
    EventRecord,
    EventSpec,
    RevisionRecord,
    RevisionSpec,
    ServiceStatusRecord,
    WatchCursorRecord,
    WatchFailureRecord,
)


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


class NotFound(LookupError):
    """A repo id the registry does not know."""


def _loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def _parse_config(raw: bytes | None, problem: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if raw is None:
        return None, problem
    try:
        return configs.parse_config(raw), problem
    except configs.ConfigError as exc:
        return None, str(exc)


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._factory = sessionmaker(engine, expire_on_commit=False)
        self._unit: ContextVar[Session | None] = ContextVar(f"unit-{id(self)}", default=None)

    @classmethod
    def open(cls, url: str) -> Store:
        return cls(open_database(url))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on exit, or the enclosing unit of work's session when inside one."""
        current = self._unit.get()
        if current is not None:
            yield current
            return
        with session_scope(self._factory) as session:
            yield session

    @contextmanager
    def unit(self) -> Iterator[None]:
        """Group several store calls into one transaction: all of them land, or none does."""
        if self._unit.get() is not None:
            yield
            return
        with session_scope(self._factory) as session:
            token = self._unit.set(session)
            try:
                yield
            finally:
                self._unit.reset(token)

    # ---- checkpoints -------------------------------------------------------------------------

    def _checkpoint(self, session: Session, repo_id: str) -> Checkpoint | None:
        found = session.scalar(select(Checkpoint).where(Checkpoint.repo_id == repo_id))
        if found is not None:
            return found
        alias = session.scalar(select(CheckpointAlias).where(CheckpointAlias.alias == repo_id))
        return session.get(Checkpoint, alias.checkpoint_id) if alias else None

    def canonical_repo_id(self, repo_id: str) -> str:
        with self.session() as session:
            found = self._checkpoint(session, repo_id)
            return found.repo_id if found else repo_id

    def upsert_checkpoint(self, spec: CheckpointSpec) -> CheckpointRecord:
        with self.session() as session:
            row = self._upsert_checkpoint(session, spec)
            session.flush()
            return _checkpoint_record(row)

    def _upsert_checkpoint(self, session: Session, spec: CheckpointSpec) -> Checkpoint:
        row = self._checkpoint(session, spec.repo_id)
        parsed = names.parse_repo_id(spec.repo_id)
        if row is None:
            row = Checkpoint(
                repo_id=spec.repo_id,
                org=parsed.org,
                family=spec.family or parsed.family,
                generation=spec.generation or parsed.generation,
                size=spec.size or parsed.size,
                variant=spec.variant or parsed.variant,
                kind=spec.kind or "unknown",
                source=spec.source,
                gated=bool(spec.gated),
                first_seen=utcnow(),
            )
            session.add(row)
        for attr in ("family", "generation", "size", "variant", "kind", "created_at_hub", "released",
                     "released_precision", "released_note", "gated", "fact_source"):
            value = getattr(spec, attr)
            if value is not None:
                setattr(row, attr, value)
        known = {(b.base_repo_id, b.relation) for b in row.bases}
        for base_repo_id, relation in spec.bases:
            if (base_repo_id, relation) not in known and base_repo_id != row.repo_id:
                row.bases.append(CheckpointBase(base_repo_id=base_repo_id, relation=relation))
        return row

    def add_listed_checkpoint(self, spec: CheckpointSpec, revision: RevisionSpec) -> None:
        """Record a checkpoint the caller knows to be new, from a listing alone (no config read).

        The watcher's first poll of a big org records thousands of these; skipping the lookups and flushes of
        `upsert_checkpoint` + `add_checkpoint_revision` is what keeps that poll short.
        """
        parsed = names.parse_repo_id(spec.repo_id)
        row = Checkpoint(
            repo_id=spec.repo_id,
            org=parsed.org,
            family=spec.family or parsed.family,
            generation=spec.generation or parsed.generation,
            size=spec.size or parsed.size,
            variant=spec.variant or parsed.variant,
            kind=spec.kind or "unknown",
            created_at_hub=spec.created_at_hub,
            source=spec.source,
            gated=bool(spec.gated),
            first_seen=utcnow(),
            head_sha=revision.sha,
            bases=[CheckpointBase(base_repo_id=b, relation=r) for b, r in dict(spec.bases).items() if b != spec.repo_id],
        )
        row.revisions.append(CheckpointRevision(sha=revision.sha, last_modified=revision.last_modified, seen_at=utcnow()))
        with self.session() as session:
            session.add(row)

    def rename_checkpoint(self, old_repo_id: str, new_repo_id: str) -> None:
        """A repo moved on the Hub: keep one checkpoint under the new id and remember the old one."""
        with self.session() as session:
            old = session.scalar(select(Checkpoint).where(Checkpoint.repo_id == old_repo_id))
            new = session.scalar(select(Checkpoint).where(Checkpoint.repo_id == new_repo_id))
            if old is not None and new is None:
                old.repo_id = new_repo_id
                target_id = old.id
            elif new is not None:
                target_id = new.id
                if old is not None and old.id != new.id:
                    session.delete(old)
            else:
                return
            session.flush()
            if session.scalar(select(CheckpointAlias).where(CheckpointAlias.alias == old_repo_id)) is None:
                session.add(CheckpointAlias(alias=old_repo_id, checkpoint_id=target_id))

    def set_checkpoint_status(self, repo_id: str, status: str, detail: str | None = None) -> None:
        with self.session() as session:
            row = self._checkpoint(session, repo_id)
            if row is None:
                raise NotFound(repo_id)
            row.status, row.status_detail = status, detail
            if status == "gated":
                row.gated = True

    def add_checkpoint_revision(self, repo_id: str, spec: RevisionSpec) -> tuple[RevisionRecord, bool]:
        """Record a revision once; a second call with the same sha returns the stored one unchanged."""
        with self.session() as session:
            checkpoint = self._checkpoint(session, repo_id)
            if checkpoint is None:
                raise NotFound(repo_id)
            row, created = self._add_checkpoint_revision(session, checkpoint, spec)
            session.flush()
            return _revision_record(checkpoint.repo_id, row), created

    def _add_checkpoint_revision(
        self, session: Session, checkpoint: Checkpoint, spec: RevisionSpec
    ) -> tuple[CheckpointRevision, bool]:
        existing = session.scalar(
            select(CheckpointRevision).where(
                CheckpointRevision.checkpoint_id == checkpoint.id, CheckpointRevision.sha == spec.sha
            )
        )
        checkpoint.head_sha = spec.sha
        if existing is not None:
            # One sha is one content: a later, fuller read of the same revision only fills in what was unread.
            if existing.config_json is None and existing.config_problem is None and (
                spec.config_raw is not None or spec.config_problem is not None
            ):
                self._fill_checkpoint_revision(existing, spec)
            return existing, False
        row = CheckpointRevision(checkpoint_id=checkpoint.id, sha=spec.sha, seen_at=utcnow())
        self._fill_checkpoint_revision(row, spec)
        session.add(row)
        return row, True

    @staticmethod
    def _fill_checkpoint_revision(row: CheckpointRevision, spec: RevisionSpec) -> None:
        config, problem = _parse_config(spec.config_raw, spec.config_problem)
        facts = configs.model_facts(config) if config is not None else None
        if facts is not None and facts.problems and problem is None:
            problem = "; ".join(facts.problems)
        row.last_modified = spec.last_modified or row.last_modified
        row.architectures = list(facts.architectures) if facts else None
        row.model_type = facts.model_type if facts else None
        row.vocab_size = facts.vocab_size if facts else None
        row.hidden_size = facts.hidden_size if facts else None
        row.num_hidden_layers = facts.num_hidden_layers if facts else None
        row.tokenizer_digest = spec.tokenizer_digest or row.tokenizer_digest
        row.weight_bytes = spec.weight_bytes or row.weight_bytes
        row.weight_digest = spec.weight_digest or row.weight_digest
        row.parameter_count = spec.parameter_count or row.parameter_count
        row.config_json = json.dumps(config, sort_keys=True) if config is not None else None
        row.config_fingerprint = configs.config_fingerprint(config) if config is not None else None
        row.config_problem = problem

    def needs_details(self, repo_id: str) -> bool:
        """True when the checkpoint's head revision was recorded from a listing only (its config never read)."""
        head = self.head_revision(repo_id)
        return head is not None and head.sha != "catalog" and head.config is None and head.config_problem is None

    # ---- drafters ----------------------------------------------------------------------------

    def _drafter(self, session: Session, repo_id: str) -> Drafter | None:
        found = session.scalar(select(Drafter).where(Drafter.repo_id == repo_id))
        if found is not None:
            return found
        alias = session.scalar(select(DrafterAlias).where(DrafterAlias.alias == repo_id))
        return session.get(Drafter, alias.drafter_id) if alias else None

    def rename_drafter(self, old_repo_id: str, new_repo_id: str) -> None:
        """A drafter repo moved on the Hub: keep one drafter under the new id and remember the old one."""
        with self.session() as session:
            old = session.scalar(select(Drafter).where(Drafter.repo_id == old_repo_id))
            new = session.scalar(select(Drafter).where(Drafter.repo_id == new_repo_id))
            if old is not None and new is None:
                old.repo_id = new_repo_id
                old.publisher = new_repo_id.split("/", 1)[0]
                target_id = old.id
            elif new is not None:
                target_id = new.id
                if old is not None and old.id != new.id:
                    session.delete(old)
            else:
                return
            session.flush()
            if session.scalar(select(DrafterAlias).where(DrafterAlias.alias == old_repo_id)) is None:
                session.add(DrafterAlias(alias=old_repo_id, drafter_id=target_id))

    def drafters_with_head(self, sha: str) -> list[DrafterRecord]:
        with self.session() as session:
            return [_drafter_record(r) for r in session.scalars(select(Drafter).where(Drafter.head_sha == sha))]

    def upsert_drafter(self, spec: DrafterSpec) -> DrafterRecord:
        with self.session() as session:
            row = self._drafter(session, spec.repo_id)
            if row is None:
                row = Drafter(
                    repo_id=spec.repo_id,
                    method=spec.method,
                    publisher=spec.publisher,
                    source=spec.source,
                    gated=bool(spec.gated),
                    first_seen=utcnow(),
                )
                session.add(row)
            for attr in ("method", "family", "released", "released_precision", "released_note", "block_size",
                         "in_21", "gated", "notes", "fact_source"):
                value = getattr(spec, attr)
                if value is not None:
                    setattr(row, attr, value)
            known = {t.target_repo_id for t in row.targets}
            for target_repo_id, declared_by in spec.targets:
                if target_repo_id not in known:
                    row.targets.append(DrafterTarget(target_repo_id=target_repo_id, declared_by=declared_by))
                    known.add(target_repo_id)
            session.flush()
            return _drafter_record(row)

    def set_drafter_status(self, repo_id: str, status: str, detail: str | None = None) -> None:
        with self.session() as session:
            row = self._drafter(session, repo_id)
            if row is None:
                raise NotFound(repo_id)
            row.status, row.status_detail = status, detail
            if status == "gated":
                row.gated = True

    def add_drafter_revision(self, repo_id: str, spec: RevisionSpec) -> tuple[DrafterRevisionRecord, bool]:
        """Record a revision once. A revision the catalog named (never read from the Hub) gets the Hub's read of
        the same sha filled in: one sha is one content, so it stays one revision, now with its weights."""
        with self.session() as session:
            drafter = self._drafter(session, repo_id)
            if drafter is None:
                raise NotFound(repo_id)
            existing = session.scalar(
                select(DrafterRevision).where(DrafterRevision.drafter_id == drafter.id, DrafterRevision.sha == spec.sha)
            )
            drafter.head_sha = spec.sha
            if existing is not None:
                if existing.last_modified is None and spec.last_modified is not None:
                    self._fill_drafter_revision(drafter, existing, spec)
                    session.flush()
                return _drafter_revision_record(drafter.repo_id, existing), False
            row = DrafterRevision(drafter_id=drafter.id, sha=spec.sha, seen_at=utcnow())
            self._fill_drafter_revision(drafter, row, spec)
            session.add(row)
            session.flush()
            return _drafter_revision_record(drafter.repo_id, row), True

    @staticmethod
    def _fill_drafter_revision(drafter: Drafter, row: DrafterRevision, spec: RevisionSpec) -> None:
        row.last_modified = spec.last_modified or row.last_modified
        row.tokenizer_digest = spec.tokenizer_digest or row.tokenizer_digest
        row.weight_bytes = spec.weight_bytes or row.weight_bytes
        row.weight_digest = spec.weight_digest or row.weight_digest
        if row.id is not None and spec.config_raw is None:
            return  # a Hub read that got no config (gated, none in the repo) keeps the catalog's transcription
        config, problem = _parse_config(spec.config_raw, spec.config_problem)
        facts = configs.drafter_facts(config, drafter.method) if config is not None else None
        if facts is not None and facts.problems and problem is None:
            problem = "; ".join(facts.problems)
        row.block_size = facts.block_size if facts else None
        row.target_layer_ids = list(facts.target_layer_ids) if facts and facts.target_layer_ids else None
        row.num_target_layers = facts.num_target_layers if facts else None
        row.mask_token_id = facts.mask_token_id if facts else None
        # The width the target must have (an assistant's backbone, an EAGLE head's target width).
        row.hidden_size = facts.target_width if facts else None
        row.vocab_size = facts.vocab_size if facts else None
        row.config_json = json.dumps(config, sort_keys=True) if config is not None else None
        row.config_fingerprint = configs.config_fingerprint(config) if config is not None else None
        row.config_problem = problem
        if facts is not None and facts.block_size and drafter.block_size is None:
            drafter.block_size = facts.block_size

    # ---- compatibility -----------------------------------------------------------------------

    def recompute_compatibility(
        self, *, drafter_repo_id: str | None = None, checkpoint_repo_id: str | None = None
    ) -> list[CompatRecord]:
        """Recompute verdicts between head revisions: for one drafter, one checkpoint, or everything."""
        with self.session() as session:
            pairs = self._candidate_pairs(session, drafter_repo_id, checkpoint_repo_id)
            return [self._store_verdict(session, drafter, checkpoint) for drafter, checkpoint in pairs]

    def _head(self, revisions: Iterable[Any], head_sha: str | None) -> Any | None:
        revisions = list(revisions)
        for revision in revisions:
            if revision.sha == head_sha:
                return revision
        return max(revisions, key=lambda r: r.id) if revisions else None

    def _declared(self, session: Session, drafter: Drafter) -> set[str]:
        declared = set()
        for target in drafter.targets:
            found = self._checkpoint(session, target.target_repo_id)
            declared.add(found.repo_id if found else target.target_repo_id)
        return declared

    def _candidate_pairs(
        self, session: Session, drafter_repo_id: str | None, checkpoint_repo_id: str | None
    ) -> list[tuple[Drafter, Checkpoint]]:
        """Pairs worth a verdict: declared targets, their derivatives, and checkpoints of the same width."""
        if drafter_repo_id is not None:
            drafter = self._drafter(session, drafter_repo_id)
            if drafter is None:
                raise NotFound(drafter_repo_id)
            drafters = [drafter]
        else:
            drafters = list(session.scalars(select(Drafter)))
        if checkpoint_repo_id is not None:
            checkpoint = self._checkpoint(session, checkpoint_repo_id)
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
            drafter_head = self._head(drafter.revisions, drafter.head_sha)
            if drafter_head is None:
                continue
            declared = self._declared(session, drafter)
            width = drafter_head.hidden_size
            for checkpoint in checkpoints:
                if not checkpoint.revisions:
                    continue
                head = self._head(checkpoint.revisions, checkpoint.head_sha)
                related = checkpoint.repo_id in declared or any(b.base_repo_id in declared for b in checkpoint.bases)
                same_width = width is not None and head is not None and head.hidden_size == width
                if related or same_width:
                    pairs.append((drafter, checkpoint))
        return pairs

    def _store_verdict(self, session: Session, drafter: Drafter, checkpoint: Checkpoint) -> CompatRecord:
        drafter_head = self._head(drafter.revisions, drafter.head_sha)
        head = self._head(checkpoint.revisions, checkpoint.head_sha)
        result = compat.check_pair(
            _loads(drafter_head.config_json),
            _loads(head.config_json),
            drafter_method=drafter.method,
            target_repo_id=checkpoint.repo_id,
            declared_targets=tuple(sorted(self._declared(session, drafter))),
            drafter_tokenizer_digest=drafter_head.tokenizer_digest,
            target_tokenizer_digest=head.tokenizer_digest,
            target_problem=head.config_problem,
        )
        row = session.scalar(
            select(Compatibility).where(
                Compatibility.drafter_revision_id == drafter_head.id,
                Compatibility.checkpoint_revision_id == head.id,
            )
        )
        checks = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in result.checks]
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
        )

    # ---- events ------------------------------------------------------------------------------

    def record_event(self, spec: EventSpec) -> EventRecord | None:
        """Insert once per dedupe key; returns None when the event was already recorded."""
        try:
            with self.session() as session:
                if session.scalar(select(Event.id).where(Event.dedupe_key == spec.dedupe_key)) is not None:
                    return None
                row = Event(
                    type=spec.type,
                    subject=spec.subject,
                    org=spec.org,
                    family=spec.family,
                    payload=spec.payload,
                    dedupe_key=spec.dedupe_key,
                    created_at=utcnow(),
                )
                session.add(row)
                session.flush()
                return _event_record(row)
        except IntegrityError:
            return None  # a concurrent writer recorded it first

    # ---- reads -------------------------------------------------------------------------------

    def get_checkpoint(self, repo_id: str) -> CheckpointRecord | None:
        with self.session() as session:
            row = self._checkpoint(session, repo_id)
            return _checkpoint_record(row) if row else None

    def get_drafter(self, repo_id: str) -> DrafterRecord | None:
        with self.session() as session:
            row = self._drafter(session, repo_id)
            return _drafter_record(row) if row else None

    def checkpoints(self) -> list[CheckpointRecord]:
        with self.session() as session:
            query = select(Checkpoint).options(selectinload(Checkpoint.bases)).order_by(Checkpoint.repo_id)
            return [_checkpoint_record(r) for r in session.scalars(query)]

    def drafters(self) -> list[DrafterRecord]:
        with self.session() as session:
            query = select(Drafter).options(selectinload(Drafter.targets)).order_by(Drafter.repo_id)
            return [_drafter_record(r) for r in session.scalars(query)]

    def derivatives(self, base_repo_id: str) -> list[CheckpointRecord]:
        """Checkpoints whose base_model relations name `base_repo_id` (finetunes, quantizations, adapters)."""
        with self.session() as session:
            query = select(Checkpoint).join(CheckpointBase).where(CheckpointBase.base_repo_id == base_repo_id)
            return [_checkpoint_record(r) for r in session.scalars(query)]

    def checkpoints_with_head(self, sha: str) -> list[CheckpointRecord]:
        with self.session() as session:
            return [_checkpoint_record(r) for r in session.scalars(select(Checkpoint).where(Checkpoint.head_sha == sha))]

    def head_revision(self, repo_id: str) -> RevisionRecord | None:
        with self.session() as session:
            row = self._checkpoint(session, repo_id)
            head = self._head(row.revisions, row.head_sha) if row else None
            return _revision_record(row.repo_id, head) if head is not None and row is not None else None

    def revisions(self, repo_id: str) -> list[RevisionRecord]:
        with self.session() as session:
            row = self._checkpoint(session, repo_id)
            if row is None:
                return []
            return [_revision_record(row.repo_id, r) for r in sorted(row.revisions, key=lambda r: r.id)]

    def drafter_head_revision(self, repo_id: str) -> DrafterRevisionRecord | None:
        with self.session() as session:
            row = self._drafter(session, repo_id)
            head = self._head(row.revisions, row.head_sha) if row else None
            return _drafter_revision_record(row.repo_id, head) if head is not None and row is not None else None

    def drafter_revisions(self, repo_id: str) -> list[DrafterRevisionRecord]:
        with self.session() as session:
            row = self._drafter(session, repo_id)
            if row is None:
                return []
            return [_drafter_revision_record(row.repo_id, r) for r in sorted(row.revisions, key=lambda r: r.id)]

    def verdicts(self, *, checkpoint_repo_id: str | None = None, drafter_repo_id: str | None = None,
                 heads_only: bool = True) -> list[CompatRecord]:
        """Stored verdicts, by default only between the current head revisions."""
        with self.session() as session:
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
                checkpoint = self._checkpoint(session, checkpoint_repo_id)
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
                )
                for row, drafter_sha, drafter, checkpoint_sha, checkpoint_repo in session.execute(
                    query.order_by(Compatibility.id)
                )
            ]

    def aliases(self) -> dict[str, str]:
        """Old repo id -> current repo id, for every renamed checkpoint."""
        with self.session() as session:
            rows = session.execute(select(CheckpointAlias.alias, Checkpoint.repo_id).join(Checkpoint))
            return {alias: repo_id for alias, repo_id in rows}

    def events(
        self,
        *,
        types: Iterable[str] | None = None,
        org: str | None = None,
        family: str | None = None,
        since: datetime | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[EventRecord]:
        with self.session() as session:
            query = select(Event).order_by(Event.id)
            if types:
                query = query.where(Event.type.in_(list(types)))
            if org:
                query = query.where(Event.org == org)
            if family:
                query = query.where(Event.family == family)
            if since:
                query = query.where(Event.created_at >= since)
            if after_id is not None:
                query = query.where(Event.id > after_id)
            if limit:
                query = query.limit(limit)
            return [_event_record(r) for r in session.scalars(query)]

    # ---- watcher health -------------------------------------------------------------------------

    def known_heads(self, org: str) -> dict[str, str | None]:
        """Repo id -> recorded head sha of every checkpoint and drafter of the org."""
        with self.session() as session:
            heads: dict[str, str | None] = dict(
                session.execute(select(Checkpoint.repo_id, Checkpoint.head_sha).where(Checkpoint.org == org)).all())
            prefix = f"{org}/"
            for repo_id, head in session.execute(
                select(Drafter.repo_id, Drafter.head_sha).where(Drafter.repo_id.startswith(prefix, autoescape=True))
            ):
                heads[repo_id] = head
            return heads

    def gone_repo_ids(self, org: str) -> set[str]:
        """Checkpoints and drafters of the org last found gone from the Hub (status "gone")."""
        with self.session() as session:
            gone = set(session.scalars(select(Checkpoint.repo_id).where(Checkpoint.org == org,
                                                                        Checkpoint.status == "gone")))
            gone |= set(session.scalars(select(Drafter.repo_id).where(
                Drafter.repo_id.startswith(f"{org}/", autoescape=True), Drafter.status == "gone")))
            return gone

    def record_watch_failure(self, repo_id: str, org: str, error: str, *, quarantine_after: int,
                             quarantine_s: float) -> WatchFailureRecord:
        """Count one more failure of the repo; at `quarantine_after` failures it is quarantined for
        `quarantine_s` seconds (doubling with each further failure)."""
        now = utcnow()
        with self.session() as session:
            row = session.scalar(select(WatchFailure).where(WatchFailure.repo_id == repo_id))
            if row is None:
                row = WatchFailure(repo_id=repo_id, org=org, failures=0, last_error="", failed_at=now)
                session.add(row)
            row.failures += 1
            row.last_error = error[:2000]
            row.failed_at = now
            if row.failures >= quarantine_after:
                factor = 2 ** min(row.failures - quarantine_after, 6)
                row.retry_at = now + timedelta(seconds=quarantine_s * factor)
            session.flush()
            return _failure_record(row)

    def clear_watch_failure(self, repo_id: str) -> None:
        with self.session() as session:
            row = session.scalar(select(WatchFailure).where(WatchFailure.repo_id == repo_id))
            if row is not None:
                session.delete(row)

    def release_quarantine(self, repo_id: str | None = None) -> int:
        """End the quarantine of one repo (or all) now: the next poll tries it again. Returns how many."""
        now = utcnow()
        with self.session() as session:
            query = select(WatchFailure).where(WatchFailure.retry_at.is_not(None))
            if repo_id is not None:
                query = query.where(WatchFailure.repo_id == repo_id)
            rows = list(session.scalars(query))
            for row in rows:
                row.retry_at = now
            return len(rows)

    def quarantined(self, org: str) -> set[str]:
        """Repos of the org the watcher skips for now."""
        now = utcnow()
        with self.session() as session:
            return set(session.scalars(select(WatchFailure.repo_id).where(
                WatchFailure.org == org, WatchFailure.retry_at.is_not(None), WatchFailure.retry_at > now)))

    def watch_cursors(self) -> list[WatchCursorRecord]:
        with self.session() as session:
            return [WatchCursorRecord(org=r.org, polled_at=aware(r.polled_at), last_error=r.last_error,
                                      lease_owner=r.lease_owner)
                    for r in session.scalars(select(WatchCursor).order_by(WatchCursor.org))]

    def watch_failures(self) -> list[WatchFailureRecord]:
        with self.session() as session:
            return [_failure_record(r) for r in session.scalars(select(WatchFailure).order_by(WatchFailure.repo_id))]

    def set_service_status(self, host: str, name: str, state: str, *, detail: str | None = None,
                           success: bool = False, error: str | None = None, restarted: bool = False) -> None:
        """Heartbeat of one part of `drafters up`: what it does now, and when it last succeeded or failed."""
        now = utcnow()
        for attempt in range(2):
            try:
                with self.session() as session:
                    row = session.scalar(select(ServiceStatus).where(ServiceStatus.host == host,
                                                                     ServiceStatus.name == name))
                    if row is None:
                        row = ServiceStatus(host=host, name=name, state=state, heartbeat_at=now, restarts=0)
                        session.add(row)
                    row.state, row.detail, row.heartbeat_at = state, detail, now
                    if success:
                        row.last_success_at = now
                    if error is not None:
                        row.last_error, row.last_error_at = error[:2000], now
                    if restarted:
                        row.restarts = (row.restarts or 0) + 1
                return
            except IntegrityError:
                if attempt:
                    raise  # two writers created the row at once; the second try updates it

    def service_statuses(self) -> list[ServiceStatusRecord]:
        with self.session() as session:
            rows = session.scalars(select(ServiceStatus).order_by(ServiceStatus.host, ServiceStatus.name))
            return [ServiceStatusRecord(host=r.host, name=r.name, state=r.state, detail=r.detail,
                                        heartbeat_at=aware(r.heartbeat_at), last_success_at=aware(r.last_success_at),
                                        last_error=r.last_error, last_error_at=aware(r.last_error_at),
                                        restarts=r.restarts or 0) for r in rows]


def _failure_record(row: WatchFailure) -> WatchFailureRecord:
    return WatchFailureRecord(repo_id=row.repo_id, org=row.org, failures=row.failures, last_error=row.last_error,
                              failed_at=aware(row.failed_at), retry_at=aware(row.retry_at))


def _checkpoint_record(row: Checkpoint) -> CheckpointRecord:
    return CheckpointRecord(
        id=row.id,
        repo_id=row.repo_id,
        org=row.org,
        family=row.family,
        size=row.size,
        variant=row.variant,
        kind=row.kind,
        released=row.released,
        released_precision=row.released_precision,
        created_at_hub=aware(row.created_at_hub),
        gated=row.gated,
        status=row.status,
        status_detail=row.status_detail,
        head_sha=row.head_sha,
        source=row.source,
        first_seen=aware(row.first_seen),
        bases=tuple((b.base_repo_id, b.relation) for b in row.bases),
    )


def _revision_record(repo_id: str, row: CheckpointRevision) -> RevisionRecord:
    return RevisionRecord(
        id=row.id,
        repo_id=repo_id,
        sha=row.sha,
        seen_at=aware(row.seen_at),
        last_modified=aware(row.last_modified),
        model_type=row.model_type,
        hidden_size=row.hidden_size,
        vocab_size=row.vocab_size,
        num_hidden_layers=row.num_hidden_layers,
        tokenizer_digest=row.tokenizer_digest,
        weight_bytes=row.weight_bytes,
        weight_digest=row.weight_digest,
        parameter_count=row.parameter_count,
        config=_loads(row.config_json),
        config_problem=row.config_problem,
    )


def _drafter_record(row: Drafter) -> DrafterRecord:
    return DrafterRecord(
        id=row.id,
        repo_id=row.repo_id,
        method=row.method,
        publisher=row.publisher,
        family=row.family,
        released=row.released,
        released_precision=row.released_precision,
        released_note=row.released_note,
        block_size=row.block_size,
        in_21=row.in_21,
        gated=row.gated,
        status=row.status,
        head_sha=row.head_sha,
        notes=row.notes,
        source=row.source,
        first_seen=aware(row.first_seen),
        targets=tuple((t.target_repo_id, t.declared_by) for t in row.targets),
    )


def _drafter_revision_record(repo_id: str, row: DrafterRevision) -> DrafterRevisionRecord:
    return DrafterRevisionRecord(
        id=row.id,
        repo_id=repo_id,
        sha=row.sha,
        seen_at=aware(row.seen_at),
        last_modified=aware(row.last_modified),
        block_size=row.block_size,
        target_layer_ids=tuple(row.target_layer_ids) if row.target_layer_ids else None,
        num_target_layers=row.num_target_layers,
        mask_token_id=row.mask_token_id,
        hidden_size=row.hidden_size,
        vocab_size=row.vocab_size,
        weight_bytes=row.weight_bytes,
        weight_digest=row.weight_digest,
        config=_loads(row.config_json),
        config_problem=row.config_problem,
    )


def _event_record(row: Event) -> EventRecord:
    return EventRecord(
        id=row.id,
        type=row.type,
        subject=row.subject,
        org=row.org,
        family=row.family,
        payload=dict(row.payload),
        dedupe_key=row.dedupe_key,
        created_at=aware(row.created_at),
    )
