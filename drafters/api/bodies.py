"""The API's bodies, built from a read-only store: plain JSON-able dicts (the app adds `schema_version`).

Every function here only reads; the store it gets refuses writes (registry/store/read_only.py).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any

from registry import reports
from registry.calibration.run_view import run_json
from registry.calibration.launch_inputs import built_in_pairs, exact_pairs, measured_draft_length, pick_gpu, \
    side_parameters
from registry.calibration.ranking import rank
from registry.calibration.recommend import recommendation_body
from registry.domain import hub_presence, lag, reliance
from registry.domain.compat import VERDICT_ORDER
from registry.domain.json_shapes import jsonable as to_jsonable
from registry.domain.launch import ENGINES, launch_command
from registry.domain.plan import counts as plan_counts
from registry.domain.records import CheckpointRecord, DrafterRecord
from registry.domain.run import Run
from registry.store import NotFound, Store
from registry.store.plan_facts import live_plan
from registry.store.runs import list_runs

MAX_PAGE = 1000


def _measured(runs: list[Run]) -> dict[str | None, list[dict[str, Any]]]:
    """Per drafter: the newest successful run per (engine, hardware) and how many there are."""
    groups: dict[tuple[str | None, str, str | None], list[Run]] = defaultdict(list)
    for run in runs:  # newest first
        groups[(run.drafter, run.engine, run.hardware)].append(run)
    out: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for (drafter, engine, hardware), group in groups.items():
        newest = group[0]
        out[drafter].append({
            "engine": engine, "engine_version": newest.engine_version, "hardware": hardware, "runs": len(group),
            "newest_run_id": newest.run_id, "tau": newest.tau, "speedup": newest.speedup,
            "tokens_per_s": newest.tokens_per_s, "draft_length": newest.draft_length,
        })
    return out


def target_lag(checkpoint: CheckpointRecord, exact: list[DrafterRecord | None], today: date) -> dict[str, Any]:
    released = reports.checkpoint_release_date(checkpoint)
    dated = sorted(d for d in (reports.drafter_release_date(r) for r in exact if r) if d)
    if released is None or (exact and not dated):
        return {"days": None, "open": not exact, "first_drafter_released": dated[0] if dated else None}
    measured = lag.target_lag(released, dated, today)
    return {"days": measured.days, "open": measured.open, "first_drafter_released": measured.first_drafter_released}


def target_drafters(store: Store, target: str, today: date, gpu: str | None = None) -> dict[str, Any]:
    """Every drafter with a verdict for the target: reasons, measured τ/speedup per engine and hardware, and for
    exact pairs the launch command of each engine."""
    checkpoint = store.reads.get_checkpoint(target)
    if checkpoint is None:
        raise NotFound(f"{target} is not in the registry")
    verdicts = store.reads.verdicts(checkpoint_repo_id=checkpoint.repo_id)
    records = {v.drafter_repo_id: store.reads.get_drafter(v.drafter_repo_id) for v in verdicts}
    # Filtered here rather than in SQL: with `status` in the query SQLite (no ANALYZE statistics) walks the
    # status index over every run instead of the target's few (63 ms → under 1 ms at 100,000 runs).
    runs = [r for r in list_runs(store, target=checkpoint.repo_id) if r.status == "ok"]
    measured = _measured(runs)
    chosen_gpu = pick_gpu(gpu)
    pairs = {p.drafter: p for p in exact_pairs(store, checkpoint.repo_id, verdicts=verdicts, records=records,
                                              checkpoint=checkpoint)}
    built_in = built_in_pairs(store, checkpoint.repo_id, checkpoint)
    target_parameters = side_parameters(store, checkpoint.repo_id, checkpoint.head_sha)
    # The exact rows in the order `drafters find`, `launch` and the recommendation use (registry.calibration.ranking).
    ranked = {r.pair.drafter: (position, r) for position, r in enumerate(
        rank([*built_in, *pairs.values()], runs, chosen_gpu, None, records=records,
             target_parameters=target_parameters), start=1)}
    drafters = []
    for verdict in verdicts:
        record = records[verdict.drafter_repo_id]
        pair = pairs.get(verdict.drafter_repo_id)
        position = ranked.get(verdict.drafter_repo_id) if pair is not None else None
        launches = None
        if pair is not None:
            launches = {engine: launch_command(pair, engine, measured_draft_length(store, pair, chosen_gpu, engine, runs)
                                               if measured.get(pair.drafter) else None).as_json()
                        for engine in ENGINES}
        drafters.append({
            "drafter": verdict.drafter_repo_id, "method": verdict.method,
            "publisher": record.publisher if record else None, "verdict": verdict.verdict,
            "reasons": list(verdict.reasons), "drafter_sha": verdict.drafter_sha,
            "checkpoint_sha": verdict.checkpoint_sha,
            "released": reports.drafter_release_date(record) if record else None,
            "gone": hub_presence.gone_marker(record.status, record.status_detail) if record else None,
            "measured": measured.get(verdict.drafter_repo_id, []), "launch": launches,
            "rank": None if position is None else {"position": position[0], **position[1].as_json()},
        })
    drafters.sort(key=lambda d: (VERDICT_ORDER.get(d["verdict"], 9), d["rank"]["position"] if d["rank"] else 0,
                                 d["method"], d["drafter"]))
    # The lag closes on a drafter a user can rely on (exact, or declared by a trusted publisher), as in `drafters lag`.
    publishers = store.reads.trusted_publishers()
    named = reliance.named_pairs([r for r in records.values() if r is not None], store.reads.aliases())
    exact = [v.drafter_repo_id for v in verdicts if reliance.relied_on(
        v.verdict, v.publisher, v.checkpoint_repo_id, publishers, named=(v.drafter_repo_id, v.checkpoint_repo_id) in named)]
    return to_jsonable({
        "target": checkpoint.repo_id, "head_sha": checkpoint.head_sha, "status": checkpoint.status,
        "released": reports.checkpoint_release_date(checkpoint), "lag": target_lag(checkpoint, [records[d] for d in exact], today),
        "draft_length_priced_on": chosen_gpu.name, "drafters": drafters,
        "built_in": [{"method": p.method, "rank": {"position": ranked[p.drafter][0], **ranked[p.drafter][1].as_json()},
                      "launch": {engine: launch_command(p, engine).as_json() for engine in ENGINES}}
                     for p in built_in],
        "baseline_runs": measured.get(None, []),
    })


def recommendation(store: Store, target: str, gpu: str | None, engine: str) -> dict[str, Any]:
    """`/v1/targets/{id}/recommendation`: one drafter, one command, why (registry.calibration.recommend)."""
    checkpoint = store.reads.get_checkpoint(target)
    if checkpoint is None:
        raise NotFound(f"{target} is not in the registry")
    return to_jsonable(recommendation_body(store, checkpoint.repo_id, engine, gpu))


def drafter(store: Store, repo_id: str) -> dict[str, Any]:
    record = store.reads.get_drafter(repo_id)
    if record is None:
        raise NotFound(f"{repo_id} is not a drafter in the registry")
    revision = store.reads.drafter_head_revision(record.repo_id)
    verdicts = store.reads.verdicts(drafter_repo_id=record.repo_id)
    runs = [r for r in list_runs(store, drafter=record.repo_id) if r.status == "ok"]  # see target_drafters
    return to_jsonable({
        "drafter": record.repo_id, "method": record.method, "publisher": record.publisher, "family": record.family,
        "released": reports.drafter_release_date(record), "block_size": record.block_size, "gated": record.gated,
        "status": record.status, "head_sha": record.head_sha, "source": record.source,
        "targets": [{"target": t, "declared_by": by} for t, by in record.targets],
        "head_revision": None if revision is None else {
            "sha": revision.sha, "block_size": revision.block_size, "hidden_size": revision.hidden_size,
            "vocab_size": revision.vocab_size, "weight_bytes": revision.weight_bytes,
            "config_problem": revision.config_problem},
        "verdicts": [{"target": v.checkpoint_repo_id, "verdict": v.verdict, "reasons": list(v.reasons),
                      "checkpoint_sha": v.checkpoint_sha} for v in verdicts],
        "measured": _measured(runs).get(record.repo_id, []),
    })


def lag_page(store: Store, today: date, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    rows = reports.lag_table(store, today)
    return to_jsonable(rows[offset:offset + limit]), len(rows)


def runs_page(store: Store, *, target: str | None, drafter: str | None, engine: str | None, status: str | None,
              limit: int, offset: int) -> list[dict[str, Any]]:
    """Runs newest first, each in the one JSON encoding `drafters runs --json` prints (`run_json`)."""
    return to_jsonable([run_json(r) for r in list_runs(store, target=target, drafter=drafter, engine=engine,
                                                        status=status, limit=limit, offset=offset)])


def events_after(store: Store, after: int, limit: int) -> list[dict[str, Any]]:
    return to_jsonable(store.events.events(after_id=after, limit=limit))


def plan(store: Store, limit: int) -> dict[str, Any]:
    """Every exact pair as the live worker with the most memory plans it (the plan the dashboard shows; `drafters
    plan` plans for its own machine): measured / queued / downloading / needs N GB / gated / no engine, with reasons."""
    workers, rows = live_plan(store)
    worker = workers[0] if workers else None
    return to_jsonable({
        "worker": None if worker is None else {
            "worker_id": worker.worker_id, "device": worker.device, "memory_bytes": worker.memory_bytes,
            "engines": dict(worker.engines), "disk_budget_bytes": worker.disk_budget_bytes},
        "workers": len(workers),
        "reason": None if workers else (
            "no live worker: nothing is planned until `drafters up` or `drafters worker` runs"),
        "counts": plan_counts(rows), "total": len(rows),
        "pairs": [row.to_json() for row in rows[:limit]],
    })
