"""Drafter commands: create, rename (its runs follow) and re-status drafters, and record their revisions."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.domain import configs
from registry.domain.drafter_facts import drafter_facts
from registry.domain.records import DrafterRecord, DrafterRevisionRecord, DrafterSpec, RevisionSpec
from registry.store import lifecycle
from registry.store.core import StoreCore, utcnow
from registry.store.lifecycle import DRAFTER, RepoLifecycle
from registry.store.mappers import drafter_record, drafter_revision_record, parse_config
from registry.store.models import Drafter, DrafterRevision, DrafterTarget


class Drafters:
    """The drafter kind of the repo lifecycle (lifecycle.py), and what only drafters have: declared targets, and
    catalog rows that turn out to be built into a checkpoint."""

    def __init__(self, core: StoreCore, lifecycle: RepoLifecycle) -> None:
        self.core = core
        self.lifecycle = lifecycle

    def rename_drafter(self, old_repo_id: str, new_repo_id: str) -> None:
        """A drafter repo moved on the Hub: keep one drafter (and its runs) under the new id and remember the old
        one; a move to another org changes its publisher."""
        self.lifecycle.move_repo(DRAFTER, old_repo_id, new_repo_id)

    def upsert_drafter(self, spec: DrafterSpec) -> DrafterRecord:
        with self.core.session() as session:
            row = find_drafter(session, spec.repo_id)
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
                         "in_21", "gated", "notes", "fact_source", "license"):
                value = getattr(spec, attr)
                if value is not None:
                    setattr(row, attr, value)
            if spec.replaced_in_place is not None:
                row.replaced_in_place = list(spec.replaced_in_place) or None
            known = {t.target_repo_id for t in row.targets}
            for target_repo_id, declared_by in spec.targets:
                if target_repo_id not in known:
                    row.targets.append(DrafterTarget(target_repo_id=target_repo_id, declared_by=declared_by))
                    known.add(target_repo_id)
            session.flush()
            return drafter_record(row)

    def drop_catalog_drafter(self, repo_id: str) -> bool:
        """Remove a drafter row an older catalog import created for what is now known to be a full checkpoint
        with its drafter built in. Only a row the catalog alone made (never read from the Hub) goes; True if it did."""
        with self.core.session() as session:
            row = session.scalar(select(Drafter).where(Drafter.repo_id == repo_id))
            if row is None or row.source != "catalog" or any(r.last_modified is not None for r in row.revisions):
                return False
            session.delete(row)
            session.flush()
            return True

    def set_drafter_status(self, repo_id: str, status: str, detail: str | None = None) -> None:
        self.lifecycle.set_repo_status(DRAFTER, repo_id, status, detail)

    def add_drafter_revision(self, repo_id: str, spec: RevisionSpec, *,
                             parsed: tuple[dict[str, Any] | None, str | None] | None = None,
                             ) -> tuple[DrafterRevisionRecord, bool]:
        """Record a revision once. A revision the catalog named (never read from the Hub) gets the Hub's read of
        the same sha filled in: one sha is one content, so it stays one revision, now with its weights.

        `parsed`: the config and problem as `mappers.parse_config` gives them, when the caller parsed it already."""
        with self.core.session() as session:
            drafter = lifecycle.found(session, DRAFTER, repo_id)
            row, created = lifecycle.add_revision(
                session, DRAFTER, drafter, spec,
                fill=lambda row: self._fill_drafter_revision(drafter, row, spec, parsed),
                refill=lambda stored: stored.last_modified is None and spec.last_modified is not None)
            session.flush()
            return drafter_revision_record(drafter.repo_id, row), created

    @staticmethod
    def _fill_drafter_revision(drafter: Drafter, row: DrafterRevision, spec: RevisionSpec,
                               parsed: tuple[dict[str, Any] | None, str | None] | None = None) -> None:
        row.last_modified = spec.last_modified or row.last_modified
        row.tokenizer_digest = spec.tokenizer_digest or row.tokenizer_digest
        row.weight_bytes = spec.weight_bytes or row.weight_bytes
        row.weight_digest = spec.weight_digest or row.weight_digest
        row.license = spec.license or row.license
        if row.id is not None and spec.config_raw is None:
            return  # a Hub read that got no config (gated, none in the repo) keeps the catalog's transcription
        config, problem = parsed if parsed is not None else parse_config(spec.config_raw, spec.config_problem)
        facts = drafter_facts(config, drafter.method) if config is not None else None
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


def find_drafter(session: Session, repo_id: str) -> Drafter | None:
    row: Drafter | None = lifecycle.find(session, DRAFTER, repo_id)
    return row
