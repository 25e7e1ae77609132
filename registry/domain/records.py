"""Plain values the store hands to callers and takes from them (the ORM never leaves registry/store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any


@dataclass(frozen=True)
class CheckpointSpec:
    """What a caller knows about a checkpoint; None fields leave stored values alone."""

    repo_id: str
    source: str
    family: str | None = None
    generation: str | None = None
    size: str | None = None
    variant: str | None = None
    kind: str | None = None
    created_at_hub: datetime | None = None
    released: date | None = None
    released_precision: str | None = None
    released_note: str | None = None
    gated: bool | None = None
    fact_source: str | None = None
    bases: tuple[tuple[str, str], ...] = ()  # (base repo id, relation)
    built_in: tuple[str, ...] = ()  # drafting methods shipped inside the checkpoint; added to those already known


@dataclass(frozen=True)
class RevisionSpec:
    """One revision of a repo as read from the Hub, a local folder or the catalog."""

    sha: str
    config_raw: bytes | None = None
    config_problem: str | None = None
    last_modified: datetime | None = None
    tokenizer_digest: str | None = None
    weight_bytes: int | None = None
    weight_digest: str | None = None
    parameter_count: int | None = None
    license: str | None = None  # the Hub's `license:` tag


@dataclass(frozen=True)
class DrafterSpec:
    repo_id: str
    method: str
    publisher: str
    source: str
    targets: tuple[tuple[str, str], ...] = ()  # (target repo id, declared_by)
    family: str | None = None
    released: date | None = None
    released_precision: str | None = None
    released_note: str | None = None
    block_size: int | None = None
    in_21: bool | None = None
    gated: bool | None = None
    notes: str | None = None
    fact_source: str | None = None
    license: str | None = None
    replaced_in_place: tuple[str, ...] | None = None  # None leaves the stored list alone


@dataclass(frozen=True)
class CheckpointRecord:
    id: int
    repo_id: str
    org: str
    family: str | None
    size: str | None
    variant: str | None
    kind: str
    released: date | None
    released_precision: str | None
    created_at_hub: datetime | None
    gated: bool
    status: str
    status_detail: str | None
    head_sha: str | None
    source: str
    first_seen: datetime
    bases: tuple[tuple[str, str], ...]
    built_in: tuple[str, ...] = ()  # drafting methods shipped inside the checkpoint (MTP heads, DSpark)


@dataclass(frozen=True)
class RevisionRecord:
    id: int
    repo_id: str
    sha: str
    seen_at: datetime
    last_modified: datetime | None
    model_type: str | None
    hidden_size: int | None
    vocab_size: int | None
    num_hidden_layers: int | None
    tokenizer_digest: str | None
    weight_bytes: int | None
    weight_digest: str | None
    parameter_count: int | None
    config: dict[str, Any] | None
    config_problem: str | None


@dataclass(frozen=True)
class DrafterRecord:
    id: int
    repo_id: str
    method: str
    publisher: str
    family: str | None
    released: date | None
    released_precision: str | None
    released_note: str | None
    block_size: int | None
    in_21: bool | None
    gated: bool
    status: str
    status_detail: str | None
    head_sha: str | None
    notes: str | None
    source: str
    first_seen: datetime
    targets: tuple[tuple[str, str], ...]
    license: str | None = None
    replaced_in_place: tuple[str, ...] = ()


@dataclass(frozen=True)
class DrafterRevisionRecord:
    id: int
    repo_id: str
    sha: str
    seen_at: datetime
    # None for a revision the catalog named and the Hub was never asked about: every Hub read records one.
    last_modified: datetime | None
    block_size: int | None
    target_layer_ids: tuple[int, ...] | None
    num_target_layers: int | None
    mask_token_id: int | None
    hidden_size: int | None
    vocab_size: int | None
    weight_bytes: int | None
    weight_digest: str | None
    config: dict[str, Any] | None
    config_problem: str | None
    # Compared with the target's by the verdict (registry.domain.pair); None: not read.
    tokenizer_digest: str | None = None


@dataclass(frozen=True)
class CompatRecord:
    drafter_repo_id: str
    drafter_sha: str
    method: str
    checkpoint_repo_id: str
    checkpoint_sha: str
    verdict: str
    reasons: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]
    checked_at: datetime
    publisher: str  # the drafter's publisher: whether a "declared" pair is relied on (domain/reliance.py)


@dataclass(frozen=True)
class EventSpec:
    type: str
    subject: str
    dedupe_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    org: str | None = None
    family: str | None = None


@dataclass(frozen=True)
class EventRecord:
    id: int
    type: str
    subject: str
    org: str | None
    family: str | None
    payload: dict[str, Any]
    dedupe_key: str
    created_at: datetime


@dataclass(frozen=True)
class WatchFailureRecord:
    repo_id: str
    org: str
    failures: int
    last_error: str
    failed_at: datetime
    retry_at: datetime | None  # set while quarantined


@dataclass(frozen=True)
class ServiceStatusRecord:
    host: str
    name: str
    state: str
    detail: str | None
    heartbeat_at: datetime
    last_success_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    restarts: int


@dataclass(frozen=True)
class WatchCursorRecord:
    org: str  # an org, or tag:<tag> for a drafter query
    polled_at: datetime | None
    last_error: str | None
    lease_owner: str | None


@dataclass(frozen=True)
class OrgLease:
    """The outcome of taking an org's watch lease."""

    won: bool  # we hold the lease now
    cursor: datetime | None  # newest lastModified fully processed
    baseline: bool  # the org was never polled


@dataclass(frozen=True)
class SubscriptionSpec:
    """A webhook subscription to store; the caller picks the uid (and keeps its secret outside the database)."""

    uid: str
    url: str
    event_types: tuple[str, ...] = ()
    org: str | None = None
    family: str | None = None
    repo: str | None = None
    has_secret: bool = False
    include_past: bool = False  # False: only events recorded after the subscription are sent


@dataclass(frozen=True)
class SubscriptionRecord:
    uid: str
    url: str
    event_types: tuple[str, ...]
    org: str | None
    family: str | None
    repo: str | None
    has_secret: bool
    active: bool
    created_at: datetime


@dataclass(frozen=True)
class DueDelivery:
    """A pending delivery whose next attempt is due, with what it delivers."""

    delivery_id: int
    subscription: SubscriptionRecord
    event: EventRecord
    attempts: int  # attempts made before this one


@dataclass(frozen=True)
class JobRecord:
    id: int
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    num_gpus: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    error: str | None
    dedupe_key: str | None
    run_id: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    memory_bytes: int | None = None  # device memory the job needs; None: any worker
    engine: str | None = None  # the engine it needs; None: any worker


@dataclass(frozen=True)
class DataParts:
    """A cheap fingerprint of what the API shows, one part per kind of change, so that the API can tell what
    moved: new runs alone invalidate only the answers about their targets and drafters (drafters/api/cache.py).

    Counts and maxima over the tables the API reads. The watcher records an event for every checkpoint or
    drafter change (a new head, a rename, a move), so `events` moving covers what the catalog parts miss."""

    runs: tuple[object, ...]  # (count, max id): a run is inserted once and never updated in place
    events: tuple[object, ...]
    verdicts: tuple[object, ...]
    jobs: tuple[object, ...]
    catalog: tuple[object, ...]  # checkpoints, drafters, and the speedup curves (rare: a new one drops everything)

    @property
    def runs_count(self) -> int:
        return int(self.runs[0] or 0)

    @property
    def runs_max_id(self) -> int:
        return int(self.runs[1] or 0)
