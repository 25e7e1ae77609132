"""The watcher's units of work: one call reads what the watcher needs of a recorded model, one call applies all it
decided from the Hub read of that model (rows, status, verdicts, events) in one transaction.

The watcher (registry/watch/units.py) decides; this module only writes what the unit says, in the order the
row-by-row commands did it, and hands back what the watcher needs next.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from registry.domain import reliance
from registry.domain.hub_presence import GONE
from registry.domain.records import (
    CheckpointRecord, CompatRecord, DrafterRecord, DrafterSpec, EventSpec, RevisionRecord,
)
from registry.domain.watch_records import (
    AppliedCheckpoint,
    AppliedDrafter,
    CheckpointState,
    CheckpointUnit,
    DrafterState,
    DrafterUnit,
    RecordedRepo,
)
from registry.store.checkpoints import Checkpoints
from registry.store.core import NotFound, StoreCore
from registry.store.drafters import Drafters
from registry.store.events import Events
from registry.store.lifecycle import CHECKPOINT, DRAFTER, KINDS, RepoLifecycle
from registry.store.mappers import checkpoint_record, head_of, revision_record
from registry.store.models import Checkpoint, CheckpointAlias
from registry.store.reads import Reads
from registry.store.verdicts import Verdicts

# Most repo ids per query of checkpoint_states: far under the bound-parameter limits of SQLite (32,766) and
# PostgreSQL (65,535), so an org's listing of up to this many models is read in one query.
STATE_CHUNK = 5000


class WatchWrites:
    """The watcher's units of work, over the other areas (each passed in, none inherited)."""

    def __init__(self, core: StoreCore, *, lifecycle: RepoLifecycle, checkpoints: Checkpoints, drafters: Drafters,
                 reads: Reads, verdicts: Verdicts, events: Events) -> None:
        self.core = core
        self.lifecycle = lifecycle
        self.checkpoints = checkpoints
        self.drafters = drafters
        self.reads = reads
        self.verdicts = verdicts
        self.events = events

    # ---- reads -----------------------------------------------------------------------------------

    def checkpoint_state(self, repo_id: str) -> CheckpointState | None:
        with self.core.unit():
            record = self.reads.get_checkpoint(repo_id)
            if record is None:
                return None
            return _checkpoint_state(record, self.reads.head_revision(repo_id))

    def checkpoint_states(self, repo_ids: list[str]) -> dict[str, CheckpointState]:
        """`checkpoint_state` of each of many repo ids (aliases followed) in a few queries, not one per repo: the
        watcher reads what is recorded for a listing's models at once. Ids it records nothing under are absent."""
        states: dict[str, CheckpointState] = {}
        wanted = list(dict.fromkeys(repo_ids))
        with self.core.session() as session:
            for start in range(0, len(wanted), STATE_CHUNK):
                chunk = wanted[start:start + STATE_CHUNK]
                rows = {r.repo_id: r for r in session.scalars(
                    select(Checkpoint).where(Checkpoint.repo_id.in_(chunk))
                    .options(selectinload(Checkpoint.bases), selectinload(Checkpoint.revisions)))}
                missing = [repo_id for repo_id in chunk if repo_id not in rows]
                aliased = dict(session.execute(select(CheckpointAlias.alias, CheckpointAlias.checkpoint_id)
                                               .where(CheckpointAlias.alias.in_(missing))).all()) if missing else {}
                if aliased:
                    by_id = {r.id: r for r in session.scalars(
                        select(Checkpoint).where(Checkpoint.id.in_(set(aliased.values())))
                        .options(selectinload(Checkpoint.bases), selectinload(Checkpoint.revisions)))}
                    rows.update({alias: by_id[checkpoint_id] for alias, checkpoint_id in aliased.items()})
                for repo_id, row in rows.items():
                    head = head_of(row.revisions, row.head_sha)
                    states[repo_id] = _checkpoint_state(
                        checkpoint_record(row), revision_record(row.repo_id, head) if head is not None else None)
        return states

    def drafter_state(self, repo_id: str) -> DrafterState | None:
        with self.core.unit():
            record = self.reads.get_drafter(repo_id)
            if record is None:
                return None
            unread = all(r.last_modified is None for r in self.reads.drafter_revisions(repo_id))
            return DrafterState(record=record, head=self.reads.drafter_head_revision(repo_id), unread=unread)

    def heads_needing_details(self, target_repo_ids: list[str]) -> list[RevisionRecord]:
        """Head revisions, recorded from a listing only, of these targets and their derivatives."""
        with self.core.unit():
            related = target_repo_ids + [d.repo_id for t in target_repo_ids for d in self.reads.derivatives(t)]
            heads: dict[str, RevisionRecord] = {}  # one read per checkpoint, whichever of its ids came first
            for repo_id in dict.fromkeys(related):
                if self.reads.get_checkpoint(repo_id) is not None and self.reads.needs_details(repo_id):
                    head = self.reads.head_revision(repo_id)
                    heads.setdefault(head.repo_id, head)
            return list(heads.values())

    def drafters_with_targets(self) -> list[tuple[DrafterRecord, tuple[str, ...]]]:
        """Every drafter with the canonical ids of its declared targets (aliases followed), in one read."""
        with self.core.unit():
            return [(d, tuple(self.checkpoints.canonical_repo_id(t) for t, _ in d.targets))
                    for d in self.reads.drafters()]

    def recorded_repo(self, repo_id: str) -> RecordedRepo | None:
        """What the registry records under `repo_id` (aliases followed): a checkpoint or a drafter, its current
        record, head revision and the shas of every revision it has; None when it records no such repo."""
        with self.core.unit():
            for kind in KINDS.values():
                record = self.lifecycle.get_repo(kind, repo_id)
                if record is not None:
                    return RecordedRepo(kind=kind.name, record=record, head=self.lifecycle.repo_head(kind, repo_id),
                                        shas=frozenset(r.sha for r in self.lifecycle.repo_history(kind, repo_id)))
            return None

    def rename_repo(self, old_repo_id: str, new_repo_id: str) -> None:
        """A repo moved on the Hub: the drafter or checkpoint recorded under the old id keeps one record (and one
        run history) under the new id."""
        with self.core.unit():
            self.lifecycle.move_repo(DRAFTER if self.reads.get_drafter(old_repo_id) is not None else CHECKPOINT,
                           old_repo_id, new_repo_id)

    def mark_repo_gone(self, repo_id: str, detail: str, announce: EventSpec | None = None) -> bool:
        """Mark the checkpoint or drafter recorded under `repo_id` gone with `detail` and record `announce`; a repo
        already marked keeps its first detail and announces nothing again. True when it was marked now."""
        with self.core.unit():
            recorded = self.recorded_repo(repo_id)
            if recorded is None or recorded.status == GONE:
                return False
            self.lifecycle.set_repo_status(KINDS[recorded.kind], repo_id, GONE, detail)
            if announce is not None:
                self.events.record_event(announce)
            return True

    def record_events(self, specs: list[EventSpec]) -> None:
        with self.core.unit():
            for spec in specs:
                self.events.record_event(spec)

    # ---- writes ----------------------------------------------------------------------------------

    def apply_checkpoint_unit(self, unit: CheckpointUnit) -> AppliedCheckpoint:
        repo_id = unit.spec.repo_id
        with self.core.unit():
            if not unit.read:
                if unit.new:
                    self.checkpoints.add_listed_checkpoint(unit.spec, unit.revision)
                    revision, created = None, True
                else:
                    self.checkpoints.upsert_checkpoint(unit.spec)
                    revision, created = self.checkpoints.add_checkpoint_revision(repo_id, unit.revision)
                    if unit.status is not None:
                        self.checkpoints.set_checkpoint_status(repo_id, *unit.status)
                self.record_events(list(unit.events))
                return AppliedCheckpoint(revision=revision, created=created, attached=False)
            self.checkpoints.upsert_checkpoint(unit.spec)
            if unit.status is not None:
                self.checkpoints.set_checkpoint_status(repo_id, *unit.status)
            revision, created = self.checkpoints.add_checkpoint_revision(repo_id, unit.revision)
            attached = False
            for drafter_repo_id in unit.name_matched:
                drafter = self.reads.get_drafter(drafter_repo_id)
                if drafter is not None and not drafter.targets:
                    self.drafters.upsert_drafter(DrafterSpec(repo_id=drafter.repo_id, method=drafter.method,
                                                    publisher=drafter.publisher, source=drafter.source,
                                                    targets=((repo_id, "name_convention"),)))
                    attached = True
            verdicts = self.verdicts.recompute_compatibility(checkpoint_repo_id=repo_id)
            self.record_events(list(unit.events))
            return AppliedCheckpoint(revision=revision, created=created, attached=attached, verdicts=verdicts)

    def apply_drafter_unit(self, unit: DrafterUnit) -> AppliedDrafter:
        repo_id = unit.spec.repo_id
        with self.core.unit():
            if unit.catalog_revision is not None:
                self.drafters.add_drafter_revision(repo_id, unit.catalog_revision)
            previous = self.reads.drafter_head_revision(repo_id)
            exact_before: set[str] = set()
            if unit.first_hub_revision:
                # Only the targets this drafter names (declared, or by its name), before and after this unit, can
                # have their lag closed through it: whether a user could rely on a drafter for them before is read
                # from their verdicts alone, not from every verdict of the registry.
                recorded = self.reads.get_drafter(repo_id)
                named = {t for t, _ in unit.spec.targets} | {t for t, _ in (recorded.targets if recorded else ())}
                exact_before = self._relied_on_targets(
                    [v for target in sorted(named) for v in self.reads.verdicts(checkpoint_repo_id=target)])
            self.drafters.upsert_drafter(unit.spec)
            self.drafters.set_drafter_status(repo_id, *unit.status)
            revision, created = self.drafters.add_drafter_revision(repo_id, unit.revision,
                                                          parsed=(unit.config, unit.config_problem))
            for read in unit.targets_read:
                self.checkpoints.set_checkpoint_status(read.repo_id, *read.status)
                self.checkpoints.add_checkpoint_revision(read.repo_id, read.revision)
                self.verdicts.recompute_compatibility(checkpoint_repo_id=read.repo_id)
            verdicts = self.verdicts.recompute_compatibility(drafter_repo_id=repo_id)
            drafter = self.reads.get_drafter(repo_id)
            if drafter is None:
                raise NotFound(repo_id)
            relied_now = self._relied_on_targets(verdicts) if unit.first_hub_revision else set()
            newly_exact = tuple(
                (v.checkpoint_repo_id, self.reads.get_checkpoint(v.checkpoint_repo_id)) for v in verdicts
                if v.checkpoint_repo_id in relied_now and v.checkpoint_repo_id not in exact_before)
            return AppliedDrafter(revision=revision, created=created, previous=previous,
                                  targets=tuple(t for t, _ in drafter.targets), verdicts=verdicts,
                                  newly_exact=newly_exact)


    def _relied_on_targets(self, verdicts: list[CompatRecord] | None = None) -> set[str]:
        """Targets with a pair a user can rely on (domain/reliance.py) among `verdicts` (default: all stored)."""
        publishers = self.reads.trusted_publishers()
        named = reliance.named_pairs(self.reads.drafters(), self.reads.aliases())
        return {v.checkpoint_repo_id for v in (self.reads.verdicts() if verdicts is None else verdicts)
                if reliance.relied_on(v.verdict, v.publisher, v.checkpoint_repo_id, publishers,
                                      named=(v.drafter_repo_id, v.checkpoint_repo_id) in named)}


def _checkpoint_state(record: CheckpointRecord, head: RevisionRecord | None) -> CheckpointState:
    needs = head is not None and head.sha != "catalog" and head.config is None and head.config_problem is None
    return CheckpointState(record=record, head=head, needs_details=needs)
