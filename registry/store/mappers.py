"""Stored rows -> the plain records of records.py (by field name: a record's fields are its columns, apart from the
few computed ones each mapper names), runs to and from their rows, and the small parsing rules the store applies on
the way in."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import fields, replace
from datetime import datetime
from typing import Any, TypeVar

from registry.domain import configs
from registry.domain.measurement import SetMeasurement
from registry.domain.records import (
    CheckpointRecord,
    DrafterRecord,
    DrafterRevisionRecord,
    EventRecord,
    JobRecord,
    RevisionRecord,
    SubscriptionRecord,
    WatchFailureRecord,
)
from registry.domain.run import Run, RunPrediction
from registry.domain.stored_json import from_json, to_json
from registry.store.core import aware
from registry.store.models import (
    BenchmarkRun,
    Checkpoint,
    CheckpointRevision,
    Drafter,
    DrafterRevision,
    Event,
    Job,
    RunPredictionRow,
    Subscription,
    WatchFailure,
)

# A run's fields that have a column of their own (filtered, indexed or shown by SQL); the rest of the run (its
# measurement: settings, overall, forward costs, divergence) is the `metrics` JSON, each prompt set a
# run_set_result row whose `metrics` is its SetMeasurement, the provenance its own JSON column, and the prediction a
# run_prediction row.
RUN_COLUMNS = ("run_id", "created_at", "status", "failure_reason", "job_id", "engine", "engine_version", "target",
               "target_revision", "drafter", "drafter_revision", "method", "draft_length", "device_name", "hardware",
               "torch_version", "transformers_version", "lossless", "peak_memory_bytes", "target_weight_bytes",
               "drafter_weight_bytes")
_ELSEWHERE = {*RUN_COLUMNS, "per_set", "provenance", "prediction"}
# Numbers copied out of the measurement into columns so SQL can filter and aggregate them; read back from the JSON.
QUERY_COLUMNS = ("temperature", "seed", "dtype", "tau", "acceptance_rate", "baseline_tokens_per_s", "tokens_per_s",
                 "speedup", "efficiency")

_Revision = TypeVar("_Revision", CheckpointRevision, DrafterRevision)
_Record = TypeVar("_Record")


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


def _record(record_type: type[_Record], row: Any, **computed: Any) -> _Record:
    """A record from the row's attributes of the same names (datetimes made timezone-aware); `computed` gives the
    fields that are not a column as is (relations, JSON text, tuples)."""
    values = dict(computed)
    for f in fields(record_type):
        if f.name not in values:
            value = getattr(row, f.name)
            values[f.name] = aware(value) if isinstance(value, datetime) else value
    return record_type(**values)


def failure_record(row: WatchFailure) -> WatchFailureRecord:
    return _record(WatchFailureRecord, row)


def checkpoint_record(row: Checkpoint) -> CheckpointRecord:
    return _record(CheckpointRecord, row, bases=tuple((b.base_repo_id, b.relation) for b in row.bases),
                   built_in=tuple(row.built_in.split(",")) if row.built_in else ())


def revision_record(repo_id: str, row: CheckpointRevision) -> RevisionRecord:
    return _record(RevisionRecord, row, repo_id=repo_id, config=loads(row.config_json))


def drafter_record(row: Drafter) -> DrafterRecord:
    return _record(DrafterRecord, row, targets=tuple((t.target_repo_id, t.declared_by) for t in row.targets),
                   replaced_in_place=tuple(row.replaced_in_place or ()))


def drafter_revision_record(repo_id: str, row: DrafterRevision) -> DrafterRevisionRecord:
    return _record(DrafterRevisionRecord, row, repo_id=repo_id, config=loads(row.config_json),
                   target_layer_ids=tuple(row.target_layer_ids) if row.target_layer_ids else None)


def event_record(row: Event) -> EventRecord:
    return _record(EventRecord, row, payload=dict(row.payload))


def job_record(row: Job) -> JobRecord:
    return _record(JobRecord, row, payload=dict(row.payload))


def run_values(run: Run) -> dict[str, Any]:
    """A run as benchmark_run column values (set rows apart): its columns, the query copies and its JSON."""
    encoded = to_json(run)
    values = {name: getattr(run, name) for name in RUN_COLUMNS + QUERY_COLUMNS}
    values["metrics"] = {k: v for k, v in encoded.items() if k not in _ELSEWHERE}
    values["provenance"] = encoded["provenance"]
    return values


def prediction_row(prediction: RunPrediction) -> RunPredictionRow:
    return RunPredictionRow(model_version=prediction.model_version, prediction=to_json(prediction))


def set_values(result: SetMeasurement) -> dict[str, Any]:
    """One prompt set's run_set_result column values: query copies and the SetMeasurement as JSON."""
    return {
        "prompt_set": result.name,
        "prompt_set_digest": result.digest,
        "tau": result.tau,
        "tau_spread": None,  # τ is pooled over repeats; with greedy decoding it does not vary
        "acceptance_rate": result.acceptance_rate,
        "per_position_acceptance": list(result.per_position_acceptance),
        "baseline_tokens_per_s": result.baseline_tokens_per_s.median if result.baseline_tokens_per_s else None,
        "tokens_per_s": result.tokens_per_s.median if result.tokens_per_s else None,
        "speedup": result.speedup.median if result.speedup else None,
        "speedup_spread": result.speedup.maximum - result.speedup.minimum if result.speedup else None,
        "lossless": result.lossless,
        "metrics": to_json(result),
    }


def run_measurement(row: BenchmarkRun) -> Run:
    """The run's `metrics` JSON alone (no columns, no set rows): enough to rewrite that JSON."""
    return from_json(Run, {**(row.metrics or {}), "target": row.target, "drafter": row.drafter})


def run_record(row: BenchmarkRun) -> Run:
    stored = run_measurement(row)
    columns = {name: getattr(row, name) for name in RUN_COLUMNS}
    columns["created_at"] = aware(row.created_at)
    return replace(
        stored,
        **columns,
        per_set=tuple(from_json(SetMeasurement, r.metrics) for r in sorted(row.set_results, key=lambda r: r.id)),
        provenance=dict(row.provenance or {}),
        prediction=from_json(RunPrediction, row.prediction.prediction) if row.prediction is not None else None,
    )


def subscription_record(row: Subscription) -> SubscriptionRecord:
    return _record(SubscriptionRecord, row, event_types=tuple(row.event_types))
