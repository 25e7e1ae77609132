"""Checkpoint commands: create, rename and re-status checkpoints, and record their revisions."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from registry.domain import configs, names
from registry.domain.records import CheckpointRecord, CheckpointSpec, RevisionRecord, RevisionSpec
from registry.store import lifecycle
from registry.store.core import StoreCore, utcnow
from registry.store.lifecycle import CHECKPOINT, RepoLifecycle
from registry.store.mappers import checkpoint_record, parse_config, revision_record
from registry.store.models import Checkpoint, CheckpointBase, CheckpointRevision


class Checkpoints:
    """The checkpoint kind of the repo lifecycle (lifecycle.py), and what only checkpoints have: bases, built-in
    drafters, and rows recorded from a listing alone."""

    def __init__(self, core: StoreCore, lifecycle: RepoLifecycle) -> None:
        self.core = core
        self.lifecycle = lifecycle

    def canonical_repo_id(self, repo_id: str) -> str:
        with self.core.session() as session:
            found = find_checkpoint(session, repo_id)
            return found.repo_id if found else repo_id

    def upsert_checkpoint(self, spec: CheckpointSpec) -> CheckpointRecord:
        with self.core.session() as session:
            row = self._upsert_checkpoint(session, spec)
            session.flush()
            return checkpoint_record(row)

    def _upsert_checkpoint(self, session: Session, spec: CheckpointSpec) -> Checkpoint:
        row = find_checkpoint(session, spec.repo_id)
        if row is None:
            row = _new_checkpoint(spec)
            session.add(row)
        for attr in ("family", "generation", "size", "variant", "kind", "created_at_hub", "released",
                     "released_precision", "released_note", "gated", "fact_source"):
            value = getattr(spec, attr)
            if value is not None:
                setattr(row, attr, value)
        if spec.built_in:
            # Union with what is known: a method found built in stays so (the catalog and the watcher both add).
            known_methods = set(row.built_in.split(",")) if row.built_in else set()
            row.built_in = ",".join(sorted(known_methods | set(spec.built_in)))
        known = {(b.base_repo_id, b.relation) for b in row.bases}
        for base_repo_id, relation in spec.bases:
            if (base_repo_id, relation) not in known and base_repo_id != row.repo_id:
                row.bases.append(CheckpointBase(base_repo_id=base_repo_id, relation=relation))
        return row

    def add_listed_checkpoint(self, spec: CheckpointSpec, revision: RevisionSpec) -> None:
        """Record a checkpoint the caller knows to be new, from a listing alone (no config read).

        The watcher's first poll of a big org records thousands of these: inside a unit they are queued and
        written together (three statements for the lot, see _insert_listed), not one row and flush at a time.
        """
        if not self.core.defer(_insert_listed, (spec, revision)):
            with self.core.session() as session:
                _insert_listed(session, [(spec, revision)])

    def rename_checkpoint(self, old_repo_id: str, new_repo_id: str) -> None:
        """A repo moved on the Hub: keep one checkpoint (and its runs) under the new id and remember the old one."""
        self.lifecycle.move_repo(CHECKPOINT, old_repo_id, new_repo_id)

    def set_checkpoint_status(self, repo_id: str, status: str, detail: str | None = None) -> None:
        self.lifecycle.set_repo_status(CHECKPOINT, repo_id, status, detail)

    def add_checkpoint_revision(self, repo_id: str, spec: RevisionSpec) -> tuple[RevisionRecord, bool]:
        """Record a revision once; a second call with the same sha returns the stored one unchanged, unless it was
        recorded from a listing only and this read has its config: one sha is one content, now read."""
        with self.core.session() as session:
            checkpoint = lifecycle.found(session, CHECKPOINT, repo_id)
            row, created = lifecycle.add_revision(
                session, CHECKPOINT, checkpoint, spec,
                fill=lambda row: self._fill_checkpoint_revision(row, spec),
                refill=lambda stored: stored.config_json is None and stored.config_problem is None and (
                    spec.config_raw is not None or spec.config_problem is not None))
            session.flush()
            return revision_record(checkpoint.repo_id, row), created

    @staticmethod
    def _fill_checkpoint_revision(row: CheckpointRevision, spec: RevisionSpec) -> None:
        config, problem = parse_config(spec.config_raw, spec.config_problem)
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
        row.license = spec.license or row.license
        row.config_json = json.dumps(config, sort_keys=True) if config is not None else None
        row.config_fingerprint = configs.config_fingerprint(config) if config is not None else None
        row.config_problem = problem


def find_checkpoint(session: Session, repo_id: str) -> Checkpoint | None:
    row: Checkpoint | None = lifecycle.find(session, CHECKPOINT, repo_id)
    return row


def _new_checkpoint(spec: CheckpointSpec) -> Checkpoint:
    """A checkpoint row as first recorded: what the spec says, else what its repo id says."""
    return Checkpoint(**_new_checkpoint_values(spec))


def _new_checkpoint_values(spec: CheckpointSpec) -> dict[str, Any]:
    parsed = names.parse_repo_id(spec.repo_id)
    return dict(
        repo_id=spec.repo_id,
        name_key=names.name_key(spec.repo_id),
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


def _insert_listed(session: Session, listed: list[tuple[CheckpointSpec, RevisionSpec]]) -> None:
    """New checkpoints from a listing, each with its one revision and its bases: one multi-row insert per table
    and one read of the new ids (the ORM would insert row by row to learn each id)."""
    now = utcnow()
    session.execute(insert(Checkpoint), [
        {**_new_checkpoint_values(spec), "created_at_hub": spec.created_at_hub, "head_sha": revision.sha}
        for spec, revision in listed])
    ids = dict(session.execute(select(Checkpoint.repo_id, Checkpoint.id).where(
        Checkpoint.repo_id.in_([spec.repo_id for spec, _ in listed]))).all())
    session.execute(insert(CheckpointRevision), [
        {"checkpoint_id": ids[spec.repo_id], "sha": revision.sha, "last_modified": revision.last_modified,
         "seen_at": now} for spec, revision in listed])
    bases = [{"checkpoint_id": ids[spec.repo_id], "base_repo_id": base, "relation": relation}
             for spec, _ in listed for base, relation in dict(spec.bases).items() if base != spec.repo_id]
    if bases:
        session.execute(insert(CheckpointBase), bases)
