"""ORM models. Private to registry/: callers get the dataclasses in registry.records.

It is over 400 lines: every table in one module, so that one metadata is what Alembic and the models-versus-
migrations check compare.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, Date, DateTime, Double, ForeignKey, Index, Integer, MetaData, String,
                        Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class RepoColumns:
    """The columns a checkpoint and a drafter share: the repo lifecycle's (registry/store/lifecycle.py)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    repo_id: Mapped[str] = mapped_column(String(200), unique=True)
    released: Mapped[date | None] = mapped_column(Date)
    released_precision: Mapped[str | None] = mapped_column(String(10))
    released_note: Mapped[str | None] = mapped_column(Text)
    gated: Mapped[bool] = mapped_column(Boolean, default=False)
    # ok / gated / missing / error / gone (deleted or no longer public): what the last look at the Hub found
    status: Mapped[str] = mapped_column(String(20), default="ok")
    status_detail: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(20))  # catalog / hub / local
    fact_source: Mapped[str | None] = mapped_column(Text)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AliasColumns:
    """An old repo id that now redirects: a renamed repo stays one checkpoint or drafter (its table names it)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    alias: Mapped[str] = mapped_column(String(200), unique=True)


class RevisionColumns:
    """The columns a checkpoint's and a drafter's revision share: one Hub commit, what it weighs, its config."""

    id: Mapped[int] = mapped_column(primary_key=True)
    # A Hub commit sha, or "catalog" for facts published in the reference but not yet read from the Hub.
    sha: Mapped[str] = mapped_column(String(64))
    last_modified: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    tokenizer_digest: Mapped[str | None] = mapped_column(String(64))
    weight_bytes: Mapped[int | None] = mapped_column(BigInteger)
    weight_digest: Mapped[str | None] = mapped_column(String(64))
    license: Mapped[str | None] = mapped_column(String(100))  # the Hub's license tag (migration 0010)
    config_json: Mapped[str | None] = mapped_column(Text)
    config_fingerprint: Mapped[str | None] = mapped_column(String(64))
    # Why the config could not be used (malformed, gated, missing); None when it parsed.
    config_problem: Mapped[str | None] = mapped_column(Text)


class Checkpoint(RepoColumns, Base):
    """A model repository on the Hub that drafters target (or might)."""

    __tablename__ = "checkpoint"

    org: Mapped[str] = mapped_column(String(100), index=True)
    family: Mapped[str | None] = mapped_column(String(100), index=True)
    generation: Mapped[str | None] = mapped_column(String(40))
    size: Mapped[str | None] = mapped_column(String(40))
    variant: Mapped[str | None] = mapped_column(String(100))
    # base / finetune / quantized / adapter / merge / unknown
    kind: Mapped[str] = mapped_column(String(20), default="unknown")
    created_at_hub: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Indexed: a listed repo we don't know but whose sha we do is looked up by it (renamed repos).
    head_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    # Drafting methods that ship inside this checkpoint ("mtp", "dspark"), comma-separated and sorted; None: none
    # known. A built-in drafter needs no separate download and is there from the checkpoint's release.
    built_in: Mapped[str | None] = mapped_column(String(100))
    # names.name_key of the repo's name, written with repo_id (registry/store/checkpoints.py, lifecycle.move): a
    # drafter that declares no target finds the checkpoints its name implies by this index, not by scanning every
    # repo id (issue 31). None only for a row written around the store. A change to names.name_key needs a
    # migration that refills it (as migration 0015 fills it).
    name_key: Mapped[str | None] = mapped_column(String(200), index=True)

    revisions: Mapped[list[CheckpointRevision]] = relationship(back_populates="checkpoint", cascade="all, delete-orphan")
    bases: Mapped[list[CheckpointBase]] = relationship(back_populates="checkpoint", cascade="all, delete-orphan")




class CheckpointAlias(AliasColumns, Base):
    __tablename__ = "checkpoint_alias"

    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoint.id", ondelete="CASCADE"), index=True)


class CheckpointBase(Base):
    """A base_model relation: this checkpoint derives from base_repo_id."""

    __tablename__ = "checkpoint_base"
    __table_args__ = (UniqueConstraint("checkpoint_id", "base_repo_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoint.id", ondelete="CASCADE"), index=True)
    base_repo_id: Mapped[str] = mapped_column(String(200), index=True)
    relation: Mapped[str] = mapped_column(String(20))

    checkpoint: Mapped[Checkpoint] = relationship(back_populates="bases")


class CheckpointRevision(RevisionColumns, Base):
    __tablename__ = "checkpoint_revision"
    __table_args__ = (UniqueConstraint("checkpoint_id", "sha"),)

    checkpoint_id: Mapped[int] = mapped_column(ForeignKey("checkpoint.id", ondelete="CASCADE"), index=True)
    architectures: Mapped[list[Any] | None] = mapped_column(JSON)
    model_type: Mapped[str | None] = mapped_column(String(100))
    vocab_size: Mapped[int | None] = mapped_column(Integer)
    hidden_size: Mapped[int | None] = mapped_column(Integer)
    num_hidden_layers: Mapped[int | None] = mapped_column(Integer)
    parameter_count: Mapped[int | None] = mapped_column(BigInteger)

    checkpoint: Mapped[Checkpoint] = relationship(back_populates="revisions")


class Drafter(RepoColumns, Base):
    __tablename__ = "drafter"

    # dflash / dflash2 / dspark / gemma4-assistant / eagle3 / draft-lm
    method: Mapped[str] = mapped_column(String(30), index=True)
    publisher: Mapped[str] = mapped_column(String(100), index=True)
    family: Mapped[str | None] = mapped_column(String(100))
    block_size: Mapped[int | None] = mapped_column(Integer)
    in_21: Mapped[bool | None] = mapped_column(Boolean)
    head_sha: Mapped[str | None] = mapped_column(String(64))
    notes: Mapped[str | None] = mapped_column(Text)
    # The license the repo states (a Hub license id such as "cc-by-nc-nd-4.0"); None: not known.
    license: Mapped[str | None] = mapped_column(String(100))
    # The publisher replaced the weights under the same repo id: "YYYY-MM-DD: what changed" (or "undated: …").
    replaced_in_place: Mapped[list[Any] | None] = mapped_column(JSON)

    targets: Mapped[list[DrafterTarget]] = relationship(back_populates="drafter", cascade="all, delete-orphan")
    revisions: Mapped[list[DrafterRevision]] = relationship(back_populates="drafter", cascade="all, delete-orphan")


class DrafterAlias(AliasColumns, Base):
    __tablename__ = "drafter_alias"  # migration 0006

    drafter_id: Mapped[int] = mapped_column(ForeignKey("drafter.id", ondelete="CASCADE"), index=True)


class DrafterTarget(Base):
    """A target a drafter's publisher declares, and where that declaration came from."""

    __tablename__ = "drafter_target"
    __table_args__ = (UniqueConstraint("drafter_id", "target_repo_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    drafter_id: Mapped[int] = mapped_column(ForeignKey("drafter.id", ondelete="CASCADE"), index=True)
    target_repo_id: Mapped[str] = mapped_column(String(200), index=True)
    # catalog / card_base_model / speculators_verifier / name_convention
    declared_by: Mapped[str] = mapped_column(String(30))

    drafter: Mapped[Drafter] = relationship(back_populates="targets")


class DrafterRevision(RevisionColumns, Base):
    __tablename__ = "drafter_revision"
    __table_args__ = (UniqueConstraint("drafter_id", "sha"),)

    drafter_id: Mapped[int] = mapped_column(ForeignKey("drafter.id", ondelete="CASCADE"), index=True)
    block_size: Mapped[int | None] = mapped_column(Integer)
    target_layer_ids: Mapped[list[Any] | None] = mapped_column(JSON)
    num_target_layers: Mapped[int | None] = mapped_column(Integer)
    mask_token_id: Mapped[int | None] = mapped_column(Integer)
    hidden_size: Mapped[int | None] = mapped_column(Integer)
    vocab_size: Mapped[int | None] = mapped_column(Integer)

    drafter: Mapped[Drafter] = relationship(back_populates="revisions")


class Compatibility(Base):
    __tablename__ = "compatibility"
    __table_args__ = (UniqueConstraint("drafter_revision_id", "checkpoint_revision_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    drafter_revision_id: Mapped[int] = mapped_column(ForeignKey("drafter_revision.id", ondelete="CASCADE"), index=True)
    checkpoint_revision_id: Mapped[int] = mapped_column(
        ForeignKey("checkpoint_revision.id", ondelete="CASCADE"), index=True
    )
    verdict: Mapped[str] = mapped_column(String(20), index=True)
    reasons: Mapped[list[Any]] = mapped_column(JSON)
    checks: Mapped[list[Any]] = mapped_column(JSON)
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Event(Base):
    __tablename__ = "event"

    id: Mapped[int] = mapped_column(primary_key=True)
    type: Mapped[str] = mapped_column(String(40), index=True)
    subject: Mapped[str] = mapped_column(String(200), index=True)
    org: Mapped[str | None] = mapped_column(String(100), index=True)
    family: Mapped[str | None] = mapped_column(String(100), index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Makes recording idempotent: a rerun that finds the same fact adds nothing.
    dedupe_key: Mapped[str] = mapped_column(String(400), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


# ---- watcher and alerts (migration 0002) ---------------------------------------------------------


class WatchCursor(Base):
    """How far the watcher has read one org's listing (newest lastModified it has fully processed)."""

    __tablename__ = "watch_cursor"

    id: Mapped[int] = mapped_column(primary_key=True)
    org: Mapped[str] = mapped_column(String(100), unique=True)
    last_modified: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    polled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    # Two watchers never poll one org at once: whoever holds an unexpired lease polls it.
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


# ---- watcher health and service status (migration 0005) -------------------------------------------


class WatchFailure(Base):
    """A repo the watcher failed to record: after repeated failures it is quarantined (skipped, so the org's
    cursor moves on) until `retry_at`."""

    __tablename__ = "watch_failure"

    id: Mapped[int] = mapped_column(primary_key=True)
    repo_id: Mapped[str] = mapped_column(String(200), unique=True)
    org: Mapped[str] = mapped_column(String(100), index=True)
    failures: Mapped[int] = mapped_column(Integer)
    last_error: Mapped[str] = mapped_column(Text)
    failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ServiceStatus(Base):
    """What one part of `drafters up` (watcher, alerts, worker) on one host is doing, for `drafters status`
    from another process."""

    __tablename__ = "service_status"
    __table_args__ = (UniqueConstraint("host", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(40))
    state: Mapped[str] = mapped_column(String(40))
    detail: Mapped[str | None] = mapped_column(Text)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_success_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    restarts: Mapped[int] = mapped_column(Integer, default=0)


class Subscription(Base):
    """A webhook receiver and the events it wants. Its secret lives outside the database (see alerts.secrets)."""

    __tablename__ = "subscription"

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(40), unique=True)
    url: Mapped[str] = mapped_column(Text)
    event_types: Mapped[list[Any]] = mapped_column(JSON)
    org: Mapped[str | None] = mapped_column(String(100))
    family: Mapped[str | None] = mapped_column(String(100))
    repo: Mapped[str | None] = mapped_column(String(200))
    has_secret: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Events before this one existed when the subscription was made and are not sent.
    start_after_event_id: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Delivery(Base):
    """One event to one subscription: delivered exactly once, retried with backoff until then."""

    __tablename__ = "delivery"
    __table_args__ = (UniqueConstraint("subscription_id", "event_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    subscription_id: Mapped[int] = mapped_column(ForeignKey("subscription.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("event.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(20), index=True)  # pending / delivered / failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


# ---- verifier runs and jobs (migration 0003) -----------------------------------------------------


class Job(Base):
    __tablename__ = "job"

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(30))  # verify
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), index=True)  # queued / running / done / failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    num_gpus: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    # The watcher enqueues each pair once; manual jobs leave it empty.
    dedupe_key: Mapped[str | None] = mapped_column(String(400), unique=True)
    run_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What a worker needs to take it (migration 0010): device memory the pair needs, and the engine that runs it.
    # NULL: any worker (manual and demo jobs).
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    engine: Mapped[str | None] = mapped_column(String(30))


class WorkerRow(Base):
    """A worker's stated capabilities, refreshed by its heartbeat (migration 0010)."""

    __tablename__ = "worker"

    id: Mapped[int] = mapped_column(primary_key=True)
    worker_id: Mapped[str] = mapped_column(String(100), unique=True)
    host: Mapped[str] = mapped_column(String(200))
    device: Mapped[str] = mapped_column(String(200))
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    engines: Mapped[dict[str, Any]] = mapped_column(JSON)  # engine -> version
    disk_budget_bytes: Mapped[int | None] = mapped_column(BigInteger)
    has_token: Mapped[bool] = mapped_column(Boolean, default=False)
    run_bytes_per_parameter: Mapped[float] = mapped_column(Double, default=4.0)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class Download(Base):
    """A repo revision the service downloaded itself (migration 0010): the ledger LRU eviction reads, so that
    files the service did not download are never deleted."""

    __tablename__ = "download"
    __table_args__ = (UniqueConstraint("repo_id", "revision"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repo_id: Mapped[str] = mapped_column(String(200), index=True)
    revision: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20), index=True)  # downloading / complete / failed / evicted
    path: Mapped[str] = mapped_column(Text)
    bytes_total: Mapped[int | None] = mapped_column(BigInteger)
    bytes_done: Mapped[int] = mapped_column(BigInteger, default=0)
    seconds: Mapped[float | None] = mapped_column(Double)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class BenchmarkRun(Base):
    """One measured (target, drafter) run with its provenance; failed runs are kept with their reason."""

    __tablename__ = "benchmark_run"
    # A run's series (regression_event reads its newest 20): found by index and walked newest first, whatever the
    # number of runs stored.
    # A machine's most recent runs (the pricing model's fit sample, calibration.FIT_SAMPLE): one walk of
    # (hardware, created_at) from its newest end.
    __table_args__ = (Index("ix_benchmark_run_series", "target", "drafter", "hardware", "created_at"),
                      Index("ix_benchmark_run_hardware_recent", "hardware", "created_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(String(40), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    status: Mapped[str] = mapped_column(String(20), index=True)  # ok / failed
    failure_reason: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("job.id", ondelete="SET NULL"), index=True)
    engine: Mapped[str] = mapped_column(String(30), default="pytorch")
    engine_version: Mapped[str | None] = mapped_column(String(100))
    target: Mapped[str] = mapped_column(String(300), index=True)  # repo id or local path
    target_revision: Mapped[str | None] = mapped_column(String(80))  # Hub sha or files digest
    drafter: Mapped[str | None] = mapped_column(String(300), index=True)
    drafter_revision: Mapped[str | None] = mapped_column(String(80))
    method: Mapped[str | None] = mapped_column(String(30))
    draft_length: Mapped[int | None] = mapped_column(Integer)
    temperature: Mapped[float] = mapped_column(default=0.0)
    seed: Mapped[int | None] = mapped_column(Integer)
    dtype: Mapped[str | None] = mapped_column(String(20))
    device_name: Mapped[str | None] = mapped_column(String(200))
    hardware: Mapped[str | None] = mapped_column(String(200), index=True)
    torch_version: Mapped[str | None] = mapped_column(String(40))
    transformers_version: Mapped[str | None] = mapped_column(String(40))
    lossless: Mapped[bool | None] = mapped_column(Boolean)
    tau: Mapped[float | None]
    acceptance_rate: Mapped[float | None]
    baseline_tokens_per_s: Mapped[float | None]
    tokens_per_s: Mapped[float | None]
    speedup: Mapped[float | None]
    efficiency: Mapped[float | None]
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    target_weight_bytes: Mapped[int | None] = mapped_column(BigInteger)
    drafter_weight_bytes: Mapped[int | None] = mapped_column(BigInteger)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)

    set_results: Mapped[list[RunSetResult]] = relationship(back_populates="run", cascade="all, delete-orphan")
    # Loaded with every run read (one query per read, not per run): a Run carries its prediction.
    prediction: Mapped[RunPredictionRow | None] = relationship(back_populates="run", cascade="all, delete-orphan",
                                                               lazy="selectin")


class RunSetResult(Base):
    """A run's numbers on one prompt set (acceptance depends on the prompts)."""

    __tablename__ = "run_set_result"
    __table_args__ = (UniqueConstraint("run_pk", "prompt_set"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("benchmark_run.id", ondelete="CASCADE"), index=True)
    prompt_set: Mapped[str] = mapped_column(String(100), index=True)
    prompt_set_digest: Mapped[str] = mapped_column(String(64))
    tau: Mapped[float | None]
    tau_spread: Mapped[float | None]
    acceptance_rate: Mapped[float | None]
    per_position_acceptance: Mapped[list[Any]] = mapped_column(JSON)
    baseline_tokens_per_s: Mapped[float | None]
    tokens_per_s: Mapped[float | None]
    speedup: Mapped[float | None]
    speedup_spread: Mapped[float | None]
    lossless: Mapped[bool | None] = mapped_column(Boolean)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)

    run: Mapped[BenchmarkRun] = relationship(back_populates="set_results")


class RunPredictionRow(Base):
    """The pricing model's forecast of one run (registry.calibration), kept apart from the measurement: the run is
    what was measured and never changes, the prediction is rewritten when the model is recalibrated."""

    __tablename__ = "run_prediction"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("benchmark_run.id", ondelete="CASCADE"), unique=True)
    model_version: Mapped[int] = mapped_column(Integer)
    prediction: Mapped[dict[str, Any]] = mapped_column(JSON)  # the RunPrediction (registry.domain.stored_json)

    run: Mapped[BenchmarkRun] = relationship(back_populates="prediction")


# ---- speedup curves from a user's servers (migration 0013) ------------------------------------------


class SpeedupCurveRow(Base):
    """One `drafters sweep`: a drafter's speedup at each concurrency on a server a user runs, as one series."""

    __tablename__ = "speedup_curve"

    id: Mapped[int] = mapped_column(primary_key=True)
    target: Mapped[str] = mapped_column(String(400), index=True)
    drafter: Mapped[str | None] = mapped_column(String(400), index=True)
    engine: Mapped[str] = mapped_column(String(40))
    engine_version: Mapped[str | None] = mapped_column(String(200))
    hardware: Mapped[str | None] = mapped_column(String(200))
    crossover: Mapped[int | None] = mapped_column(Integer)  # a copy of the points' crossover, for SQL filters
    conditions: Mapped[dict[str, Any]] = mapped_column(JSON)  # SweepConditions (registry.domain.stored_json)
    points: Mapped[list[Any]] = mapped_column(JSON)  # [CurvePoint], lowest concurrency first
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    # The curve job that measured it (migration 0015); NULL: a `drafters sweep` against a user's servers.
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
