"""The watcher's units of work, as plain values: what it read and decided for one model (the store applies each
in one transaction, registry/store/watch_writes.py) and what the store hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from registry.domain.records import (
    CheckpointRecord,
    CheckpointSpec,
    CompatRecord,
    DrafterRecord,
    DrafterRevisionRecord,
    DrafterSpec,
    EventSpec,
    RevisionRecord,
    RevisionSpec,
)


@dataclass(frozen=True)
class CheckpointState:
    """What the watcher needs to know of a recorded checkpoint before it reads the Hub."""

    record: CheckpointRecord
    head: RevisionRecord | None
    needs_details: bool  # its head was recorded from a listing only (config never read)


@dataclass(frozen=True)
class DrafterState:
    record: DrafterRecord
    head: DrafterRevisionRecord | None
    unread: bool  # known only from the catalog: none of its revisions was read from the Hub


@dataclass(frozen=True)
class CheckpointUnit:
    """Record one listed checkpoint: upsert it, set its status, record its revision, let drafters whose name
    implies it and that declare no target yet declare it, recompute its verdicts, record the events."""

    spec: CheckpointSpec
    revision: RevisionSpec
    new: bool  # the watcher found it unrecorded
    read: bool  # the revision's config was read; False: recorded from the listing alone (no verdicts)
    status: tuple[str, str | None] | None = None  # (status, detail), or None to leave it
    name_matched: tuple[str, ...] = ()
    events: tuple[EventSpec, ...] = ()


@dataclass(frozen=True)
class AppliedCheckpoint:
    revision: RevisionRecord | None  # None for a new checkpoint recorded from the listing alone
    created: bool
    attached: bool  # some drafter now declares it (the watcher's drafted index is stale)
    verdicts: list[CompatRecord] = field(default_factory=list)


@dataclass(frozen=True)
class TargetRead:
    """A declared target (or its derivative) recorded from a listing only, now read for a drafter."""

    repo_id: str
    revision: RevisionSpec
    status: tuple[str, str | None]


@dataclass(frozen=True)
class DrafterUnit:
    """Record one drafter revision: the catalog-named sha read first (if any), the drafter, its status and
    revision (its config parsed once, by the watcher), its targets' reads, and the verdicts."""

    spec: DrafterSpec
    status: tuple[str, str | None]
    revision: RevisionSpec
    config: dict[str, Any] | None  # `revision.config_raw` parsed; None when absent or unparsable
    config_problem: str | None = None  # the problem to record: the revision's, or why its config did not parse
    catalog_revision: RevisionSpec | None = None
    targets_read: tuple[TargetRead, ...] = ()
    first_hub_revision: bool = False  # report the checkpoints that got their first exact verdict


@dataclass(frozen=True)
class AppliedDrafter:
    revision: DrafterRevisionRecord
    created: bool
    previous: DrafterRevisionRecord | None  # the head before this revision (after a catalog sha's read)
    targets: tuple[str, ...]
    verdicts: list[CompatRecord]
    # With first_hub_revision: targets whose first pair a user can rely on (domain/reliance.py) this drafter is.
    newly_exact: tuple[tuple[str, CheckpointRecord | None], ...] = ()


@dataclass(frozen=True)
class RecordedRepo:
    """A repo the registry records: its kind ("checkpoint" or "drafter"), record, head and its revisions' shas."""

    kind: str
    record: CheckpointRecord | DrafterRecord
    head: RevisionRecord | DrafterRevisionRecord | None
    shas: frozenset[str]

    @property
    def drafter(self) -> DrafterRecord | None:
        return self.record if isinstance(self.record, DrafterRecord) else None

    @property
    def repo_id(self) -> str:
        return self.record.repo_id

    @property
    def status(self) -> str:
        return self.record.status
