"""The API's bodies, built from a read-only store: plain JSON-able dicts (the app adds `schema_version`).

Every function here only reads; the store it gets refuses writes (registry/store/read_only.py). A body that is
about one target or one drafter says so (`Built.scope`): the cache drops it when that target's or drafter's runs
change, and keeps it when another's do (drafters/api/cache.py). Their shapes are drafters/api/schemas.py.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from typing import Any

from registry import reports
from registry.calibration.run_view import run_json
from registry.calibration.launch_inputs import built_in_pairs, exact_pairs, measured_draft_length, pick_gpu, \
    side_parameters
from registry.calibration.concurrency import concurrency_for, target_curves
from registry.calibration.ranking import rank
from registry.calibration.recommend import recommendation_body
from registry.domain import hub_presence, reliance
from registry.domain.compat import VERDICT_ORDER
from registry.domain.engines import SERVER_ENGINE_NAMES
from registry.domain.gpus import Gpu, GpuCatalogError
from registry.domain.json_shapes import jsonable as to_jsonable
from registry.domain.launch import ENGINES, launch_command
from registry.domain.plan import counts as plan_counts
from registry.domain.run import Run
from registry.store import NotFound, Store

MAX_PAGE = 1000
MAX_INT64 = 2**63 - 1  # the largest offset or id a database column or OFFSET holds


class BadParameter(ValueError):
    """A query parameter the route cannot answer for (422, naming the parameter and why)."""

    def __init__(self, parameter: str, reason: str) -> None:
        super().__init__(f"{parameter}: {reason}")
        self.parameter = parameter
        self.reason = reason


@dataclass(frozen=True)
class Scope:
    """What a body shows, so the cache knows which writes make it stale: runs of `targets`/`drafters`, any run
    (`runs`), and always the catalog, verdicts and events (a change there drops every body)."""

    targets: frozenset[str] = frozenset()
    drafters: frozenset[str] = frozenset()
    runs: bool = False  # shows runs of any target (a listing of runs)


CATALOG = Scope()  # reads no run at all: the lag, upgrades, listings of targets and drafters


@dataclass(frozen=True)
class Built:
    body: dict[str, Any]
    scope: Scope
    next_query: dict[str, str] | None = None  # the parameters of the next page (the app writes the Link header)


def encode_cursor(value: Any) -> str:
    """An opaque page cursor: the sort key of the last row handed out (keyset paging, so an insert never makes a
    page repeat a row)."""
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadParameter("cursor", "not a cursor this API handed out (pass next_cursor back as is)") from None


def gpu_class(name: str | None) -> Gpu:
    """The GPU class a launch's draft length is priced for; an unknown name is the caller's error (422)."""
    default = pick_gpu(None)  # the catalog itself unreadable: the server's fault, not the caller's
    if name is None:
        return default
    try:
        return pick_gpu(name)
    except GpuCatalogError as exc:
        raise BadParameter("gpu", str(exc)) from None


def _engine_stored_name(engine: str) -> str:
    return SERVER_ENGINE_NAMES.get(engine, engine)


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


def target_drafters(store: Store, target: str, today: date, gpu: str | None = None, *, engine: str | None = None,
                   verdict: str | None = None) -> Built:
    """Every drafter with a verdict for the target: reasons, measured τ/speedup per engine and hardware, and for
    exact pairs the launch command of each engine (`engine`: of that engine only, and its runs only; `verdict`:
    the drafters with that verdict only)."""
    chosen_gpu = gpu_class(gpu)
    checkpoint = store.reads.get_checkpoint(target)
    if checkpoint is None:
        raise NotFound(f"{target} is not in the registry")
    verdicts = store.reads.verdicts(checkpoint_repo_id=checkpoint.repo_id)
    records = {v.drafter_repo_id: store.reads.get_drafter(v.drafter_repo_id) for v in verdicts}
    # Filtered here rather than in SQL: with `status` in the query SQLite (no ANALYZE statistics) walks the
    # status index over every run instead of the target's few (63 ms → under 1 ms at 100,000 runs).
    runs = [r for r in store.runs.list_runs(target=checkpoint.repo_id) if r.status == "ok"]
    measured = _measured(runs if engine is None else [r for r in runs if r.engine == _engine_stored_name(engine)])
    pairs = {p.drafter: p for p in exact_pairs(store, checkpoint.repo_id, verdicts=verdicts, records=records,
                                              checkpoint=checkpoint)}
    built_in = built_in_pairs(store, checkpoint.repo_id, checkpoint)
    target_parameters = side_parameters(store, checkpoint.repo_id, checkpoint.head_sha)
    # The exact rows in the order `drafters find`, `launch` and the recommendation use (registry.calibration.ranking).
    ranked = {r.pair.drafter: (position, r) for position, r in enumerate(
        rank([*built_in, *pairs.values()], runs, chosen_gpu, None, records=records,
             target_parameters=target_parameters), start=1)}
    engines = ENGINES if engine is None else (engine,)
    curves = target_curves(store, checkpoint.repo_id)
    stored_engine = None if engine is None else _engine_stored_name(engine)
    drafters = []
    for found in verdicts:
        if verdict is not None and found.verdict != verdict:
            continue
        record = records[found.drafter_repo_id]
        pair = pairs.get(found.drafter_repo_id)
        position = ranked.get(found.drafter_repo_id) if pair is not None else None
        launches = None
        if pair is not None:
            launches = {name: launch_command(pair, name, measured_draft_length(store, pair, chosen_gpu, name, runs)
                                             if measured.get(pair.drafter) else None).as_json()
                        for name in engines}
        drafters.append({
            "drafter": found.drafter_repo_id, "method": found.method,
            "publisher": record.publisher if record else None, "verdict": found.verdict,
            "reasons": list(found.reasons), "drafter_sha": found.drafter_sha,
            "checkpoint_sha": found.checkpoint_sha,
            "released": reports.drafter_release_date(record) if record else None,
            "gone": hub_presence.gone_marker(record.status, record.status_detail) if record else None,
            "measured": measured.get(found.drafter_repo_id, []), "launch": launches,
            "rank": None if position is None else {"position": position[0], **position[1].as_json()},
            "concurrency": concurrency_for(curves.get(found.drafter_repo_id, []), chosen_gpu,
                                           stored_engine).as_json(),
        })
    drafters.sort(key=lambda d: (VERDICT_ORDER.get(d["verdict"], 9), d["rank"]["position"] if d["rank"] else 0,
                                 d["method"], d["drafter"]))
    # The lag is `drafters lag`'s row for this target (whatever `verdict` filters): it closes on a drafter a user can
    # rely on (exact, or declared by a trusted publisher).
    publishers = store.reads.trusted_publishers()
    named = reliance.named_pairs([r for r in records.values() if r is not None], store.reads.aliases())
    relied = [v.drafter_repo_id for v in verdicts if records[v.drafter_repo_id] is not None and reliance.relied_on(
        v.verdict, v.publisher, v.checkpoint_repo_id, publishers, named=(v.drafter_repo_id, v.checkpoint_repo_id) in named)]
    row = reports.lag_row(checkpoint, {d: records[d] for d in relied}, relied, today,  # type: ignore[misc]
                          verdicts={v.drafter_repo_id: v for v in verdicts})
    return Built(to_jsonable({
        "target": checkpoint.repo_id, "head_sha": checkpoint.head_sha, "status": checkpoint.status,
        "released": reports.checkpoint_release_date(checkpoint),
        "lag": {"days": row.lag_days, "open": row.open, "first_drafter": row.first_drafter_repo_id,
                "first_drafter_released": row.first_drafter_released},
        "draft_length_priced_on": chosen_gpu.name, "drafters": drafters,
        "built_in": [{"method": p.method, "rank": {"position": ranked[p.drafter][0], **ranked[p.drafter][1].as_json()},
                      "launch": {engine: launch_command(p, engine).as_json() for engine in ENGINES},
                      "concurrency": concurrency_for(curves.get(p.drafter, []), chosen_gpu, stored_engine).as_json()}
                     for p in built_in],
        "baseline_runs": measured.get(None, []),
    }), Scope(targets=frozenset({checkpoint.repo_id})))  # it shows the runs of this target only


def recommendation(store: Store, target: str, gpu: str | None, engine: str) -> Built:
    """`/v1/targets/{id}/recommendation`: one drafter, one command, why (registry.calibration.recommend)."""
    checkpoint = store.reads.get_checkpoint(target)
    if checkpoint is None:
        raise NotFound(f"{target} is not in the registry")
    gpu_class(gpu)  # an unknown GPU class is the caller's mistake (422), named before anything is read
    return Built(to_jsonable(recommendation_body(store, checkpoint.repo_id, engine, gpu)),
                 Scope(targets=frozenset({checkpoint.repo_id})))  # ranked by this target's runs


def drafter(store: Store, repo_id: str) -> Built:
    record = store.reads.get_drafter(repo_id)
    if record is None:
        raise NotFound(f"{repo_id} is not a drafter in the registry")
    revision = store.reads.drafter_head_revision(record.repo_id)
    verdicts = store.reads.verdicts(drafter_repo_id=record.repo_id)
    runs = [r for r in store.runs.list_runs(drafter=record.repo_id) if r.status == "ok"]  # see target_drafters
    return Built(to_jsonable({
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
    }), Scope(drafters=frozenset({record.repo_id})))  # it shows the runs of this drafter only


def _keyset_page(rows: list[dict[str, Any]], key: Any, cursor: str | None, limit: int
                 ) -> tuple[list[dict[str, Any]], str | None]:
    """`limit` rows after the cursor's key in `rows` (sorted by `key`), and the cursor of the next page."""
    start = 0
    if cursor is not None:
        after = decode_cursor(cursor)
        try:
            start = next((n for n, row in enumerate(rows) if _comparable(key(row)) > _comparable(after)), len(rows))
        except TypeError:
            raise BadParameter("cursor", "not a cursor of this route") from None
    page = rows[start:start + limit]
    more = start + limit < len(rows)
    return page, encode_cursor(key(page[-1])) if page and more else None


def _comparable(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise TypeError("a cursor is a list")
    return tuple(value)


def _lag_key(row: dict[str, Any]) -> list[Any]:
    return [-(row["lag_days"] if row["lag_days"] is not None else -1), row["target_repo_id"]]  # lag_table's order


def lag_page(store: Store, today: date, limit: int, cursor: str | None) -> Built:
    """`drafters lag --json` rows, worst first, one keyset page."""
    rows = to_jsonable(reports.lag_table(store, today))
    page, next_cursor = _keyset_page(rows, _lag_key, cursor, limit)
    return Built({"lag": page, "total": len(rows), "limit": limit, "next_cursor": next_cursor}, CATALOG,
                 None if next_cursor is None else {"cursor": next_cursor})


def upgrades(store: Store, today: date) -> Built:
    """`drafters lag --upgrades --json` rows: base upgrades and whether each got an exact drafter yet."""
    return Built({"upgrades": to_jsonable(reports.upgrade_table(store, today))}, CATALOG)


def targets_page(store: Store, q: str | None, limit: int, cursor: str | None) -> Built:
    """Targets by repo id (those whose id contains `q`, case-insensitive), one keyset page."""
    needle = (q or "").casefold()
    rows = [{"target": c.repo_id, "head_sha": c.head_sha, "status": c.status, "family": c.family,
             "built_in": list(c.built_in), "released": reports.checkpoint_release_date(c)}
            for c in store.reads.checkpoints() if needle in c.repo_id.casefold()]
    page, next_cursor = _keyset_page(to_jsonable(rows), lambda r: [r["target"]], cursor, limit)
    return Built({"targets": page, "total": len(rows), "limit": limit, "next_cursor": next_cursor}, CATALOG,
                 None if next_cursor is None else {"cursor": next_cursor})


def drafters_page(store: Store, q: str | None, method: str | None, limit: int, cursor: str | None) -> Built:
    """Drafters by repo id (id containing `q`; of `method`), one keyset page."""
    needle = (q or "").casefold()
    rows = [{"drafter": d.repo_id, "method": d.method, "publisher": d.publisher, "head_sha": d.head_sha,
             "status": d.status, "released": reports.drafter_release_date(d),
             "targets": [t for t, _ in d.targets]}
            for d in store.reads.drafters()
            if needle in d.repo_id.casefold() and (method is None or d.method == method)]
    page, next_cursor = _keyset_page(to_jsonable(rows), lambda r: [r["drafter"]], cursor, limit)
    return Built({"drafters": page, "total": len(rows), "limit": limit, "next_cursor": next_cursor}, CATALOG,
                 None if next_cursor is None else {"cursor": next_cursor})


def revision(store: Store, sha: str) -> Built:
    """Which targets and drafters have `sha` as their head revision (a launcher pinned to a commit asks this)."""
    targets = store.reads.checkpoints_with_head(sha)
    drafters = store.reads.drafters_with_head(sha)
    if not targets and not drafters:
        raise NotFound(f"no target or drafter in the registry has {sha} as its head revision")
    return Built({"sha": sha, "targets": sorted(c.repo_id for c in targets),
                  "drafters": sorted(d.repo_id for d in drafters)}, CATALOG)


def runs_page(store: Store, *, target: str | None, drafter: str | None, engine: str | None, status: str | None,
              limit: int, cursor: str | None) -> Built:
    """Runs newest first, each in the one JSON encoding `drafters runs --json` prints (`run_json`), one keyset
    page: the cursor is the last run's id, and the next page starts after it in (measured, row id) order."""
    before = None
    if cursor is not None:
        found = decode_cursor(cursor)
        if not (isinstance(found, list) and len(found) == 1 and isinstance(found[0], str)):
            raise BadParameter("cursor", "not a cursor of this route")
        before = found[0]
    try:
        runs = store.runs.list_runs(target=target, drafter=drafter, engine=engine, status=status, limit=limit + 1,
                                    before_run_id=before)
    except NotFound:
        raise BadParameter("cursor", "the run it points at is no longer stored") from None
    page = to_jsonable([run_json(r) for r in runs[:limit]])
    next_cursor = encode_cursor([page[-1]["run_id"]]) if len(runs) > limit else None
    # Any new run drops it, filtered or not: a filter may name a target by an old id its runs no longer carry.
    return Built({"runs": page, "limit": limit, "next_cursor": next_cursor}, Scope(runs=True),
                 None if next_cursor is None else {"cursor": next_cursor})


def events_after(store: Store, after: int, limit: int, types: list[str] | None, settled_up_to: int) -> Built:
    """Events with id above `after`, oldest first, up to the id every writer has settled
    (registry/store/event_horizon.py): an event a slower transaction commits later never lands behind a cursor
    already handed out."""
    found = [e for e in store.events.events(after_id=after, limit=limit, types=types) if e.id <= settled_up_to]
    page = to_jsonable(found)
    return Built({"events": page, "next_after": page[-1]["id"] if page else after}, CATALOG,
                 {"after": str(page[-1]["id"])} if len(page) == limit else None)


def plan(store: Store, limit: int) -> Built:
    """Every exact pair as the live worker with the most memory plans it (the plan the dashboard shows; `drafters
    plan` plans for its own machine): measured / queued / downloading / needs N GiB / gated / no engine, with reasons."""
    workers, rows = store.plan_facts.live_plan()
    worker = workers[0] if workers else None
    return Built(to_jsonable({
        "worker": None if worker is None else {
            "worker_id": worker.worker_id, "device": worker.device, "memory_bytes": worker.memory_bytes,
            "engines": dict(worker.engines), "disk_budget_bytes": worker.disk_budget_bytes},
        "workers": len(workers),
        "reason": None if workers else (
            "no live worker: nothing is planned until `drafters up` or `drafters worker` runs"),
        "counts": plan_counts(rows), "total": len(rows),
        "pairs": [row.to_json() for row in rows[:limit]],
    }), Scope(runs=True))
