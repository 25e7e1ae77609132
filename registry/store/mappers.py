"""Stored rows -> the plain records of records.py, and the small parsing rules the store applies on the way in."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import fields
from typing import Any, TypeVar

from registry.domain import configs
from registry.store.core import aware
from registry.store.models import (
    BenchmarkRun,
    Checkpoint,
    CheckpointRevision,
    Drafter,
    DrafterRevision,
    Event,
    Job,
    Subscription,
    WatchFailure,
)
from registry.store.records import (
    CheckpointRecord,
    DrafterRecord,
    DrafterRevisionRecord,
    EventRecord,
    JobRecord,
    RevisionRecord,
    RunRecord,
    RunSpec,
    SetResult,
    SubscriptionRecord,
    WatchFailureRecord,
)

RUN_COLUMNS = [f.name for f in fields(RunSpec) if f.name not in ("sets", "run_id", "created_at")]
SET_COLUMNS = [f.name for f in fields(SetResult)]

_Revision = TypeVar("_Revision", CheckpointRevision, DrafterRevision)


def loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


def parse_config(raw: bytes | None, problem: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if raw is None:
        return None, problem
    try:
        return configs.parse_config(raw), problem
    except configs.ConfigError as exc:
        return None, str(exc)


def head_of(revisions: Iterable[_Revision], head_sha: str | None) -> _Revision | None:
    """The revision head_sha names, else the newest stored."""
    revisions = list(revisions)
    for revision in revisions:
        if revision.sha == head_sha:
            return revision
    return max(revisions, key=lambda r: r.id) if revisions else None


def failure_record(row: WatchFailure) -> WatchFailureRecord:
    return WatchFailureRecord(repo_id=row.repo_id, org=row.org, failures=row.failures, last_error=row.last_error,
                              failed_at=aware(row.failed_at), retry_at=aware(row.retry_at))


def checkpoint_record(row: Checkpoint) -> CheckpointRecord:
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


def revision_record(repo_id: str, row: CheckpointRevision) -> RevisionRecord:
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
        config=loads(row.config_json),
        config_problem=row.config_problem,
    )


def drafter_record(row: Drafter) -> DrafterRecord:
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
        status_detail=row.status_detail,
        head_sha=row.head_sha,
        notes=row.notes,
        source=row.source,
        first_seen=aware(row.first_seen),
        targets=tuple((t.target_repo_id, t.declared_by) for t in row.targets),
    )


def drafter_revision_record(repo_id: str, row: DrafterRevision) -> DrafterRevisionRecord:
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
        config=loads(row.config_json),
        config_problem=row.config_problem,
    )


def event_record(row: Event) -> EventRecord:
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


def job_record(row: Job) -> JobRecord:
    return JobRecord(
        id=row.id,
        kind=row.kind,
        payload=dict(row.payload),
        status=row.status,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        num_gpus=row.num_gpus,
        lease_owner=row.lease_owner,
        lease_expires_at=aware(row.lease_expires_at),
        error=row.error,
        dedupe_key=row.dedupe_key,
        run_id=row.run_id,
        created_at=aware(row.created_at),  # type: ignore[arg-type]
        started_at=aware(row.started_at),
        finished_at=aware(row.finished_at),
    )


def run_record(row: BenchmarkRun) -> RunRecord:
    sets = tuple(
        SetResult(
            **{
                **{name: getattr(result, name) for name in SET_COLUMNS},
                "per_position_acceptance": tuple(result.per_position_acceptance or ()),
                "metrics": dict(result.metrics or {}),
            }
        )
        for result in sorted(row.set_results, key=lambda r: r.prompt_set)
    )
    values = {name: getattr(row, name) for name in RUN_COLUMNS}
    values["metrics"] = dict(row.metrics or {})
    values["provenance"] = dict(row.provenance or {})
    return RunRecord(**values, sets=sets, run_id=row.run_id, created_at=aware(row.created_at))


def subscription_record(row: Subscription) -> SubscriptionRecord:
    return SubscriptionRecord(
        uid=row.uid,
        url=row.url,
        event_types=tuple(row.event_types),
        org=row.org,
        family=row.family,
        repo=row.repo,
        has_secret=row.has_secret,
        active=row.active,
        created_at=aware(row.created_at),  # type: ignore[arg-type]
    )
