"""The dashboard's tables: the read-only aggregates of registry/store/aggregates.py as DataFrames, with UI labels.

Nothing here writes or speaks SQL: every read goes through `ReadOnlyQueries` (registry/store/read_queries.py),
whose connections refuse writes, and comes back as plain rows and records. The pages call these functions with
the read object themselves; each table is kept for a short while within the page's script runs (`@kept`,
dashboard/page_cache.py), the dashboard's one cache.
It is over 400 lines because it is the one place the pages (and their tests) get every table from: one short
function per table, the frame shaping and labels that go with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pandas as pd

from dashboard.page_cache import LIVE_TTL_S, kept

from registry import calibration, reports
from registry.calibration.concurrency import stand_in
from registry.calibration.fit import SideFacts
from registry.calibration.launch_inputs import pick_gpu, side_parameters
from registry.calibration.ranking import rank
from registry.calibration.recommend import launchable_pairs
from registry.domain import hub_presence, pair, pricing
from registry.domain.coverage import coverage
from registry.domain.ref_labels import ref_label
from registry.domain.curve import SpeedupCurve, describe
from registry.domain.conditions import conditions_label, model_kind
from registry.local import LocalRepoError, read_local_repo
from registry.store import aware
from registry.store.read_only import FILL_COMMANDS, DatabaseMissing, Rows  # noqa: F401 - for the pages
from registry.store.read_queries import ReadOnlyQueries

METHOD_LABELS: dict[str, str] = {
    "dflash": "DFlash",
    "dflash2": "DFlash 2",
    "dspark": "DSpark",
    "gemma4-assistant": "Gemma-4 assistant",
    "eagle3": "EAGLE-3",
    "draft-lm": "draft-LM",
}
NO_VERDICT = "none"


def _frame(rows: Rows) -> pd.DataFrame:
    columns, values = rows
    return pd.DataFrame(values, columns=columns)


def _utc(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """SQLite hands back naive datetimes, PostgreSQL aware ones; both are UTC."""
    for column in columns:
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def _as_date(value: Any) -> date | None:
    if value is None or pd.isna(value):
        return None
    if isinstance(value, datetime):  # pandas Timestamps included
        return value.date()
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _checkpoint_release(released: Any, created_at_hub: Any) -> date | None:
    return pair.checkpoint_released(_as_date(released), _as_date(created_at_hub))


def _drafter_release(released: Any, source: Any, first_seen: Any) -> date | None:
    return pair.drafter_released(_as_date(released), source, _as_date(first_seen))


# ---- overview -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    targets: int
    drafters: int
    exact_pairs: int
    open_lags: int
    runs: int
    failed_runs: int
    events: int
    dflash_v1: int  # z-lab's DFlash v1 drafters counted in "21 checkpoints across 10 families"


@kept()
def counts(db: ReadOnlyQueries) -> Counts:
    return Counts(**{key: int(value or 0) for key, value in db.catalog.counts_row().items()})


# ---- the service ----------------------------------------------------------------------------------

SERVICE_COLUMNS = ["part", "state", "detail", "heartbeat", "last success", "last error", "host", "last error at"]
# A part whose heartbeat is older than this is not running now (every loop of `drafters up` beats within minutes).
ALIVE_WITHIN = timedelta(minutes=15)


@kept(LIVE_TTL_S)
def service_state(db: ReadOnlyQueries) -> pd.DataFrame:
    """Each part of `drafters up` as it last said (a server the canary checks is a `canary N` part), by name."""
    frame = _frame(db.service.service_rows())
    frame.columns = SERVICE_COLUMNS
    return _utc(frame, "heartbeat", "last success", "last error at")


@dataclass(frozen=True)
class ServiceSummary:
    """What `drafters up` is doing about an empty table, read before any page tells the user to do it by hand."""

    running: bool  # some part beat within ALIVE_WITHIN: a `drafters up` works on this database now
    watcher: str | None  # the watcher's state in words; None: no watcher ever recorded one
    watcher_trouble: bool  # its last poll failed (the Hub unreachable, a refused token)
    queue: str | None  # "5 queued, 1 running"; None: nothing waits or runs
    last_run: str | None  # "job 3: done" as the worker last said it


def _when(value: Any) -> str:
    return "never" if value is None or pd.isna(value) else pd.Timestamp(value).strftime("%Y-%m-%d %H:%M UTC")


def service_summary(parts: pd.DataFrame, jobs: Mapping[str, int], now: datetime) -> ServiceSummary:
    """The service's state from its parts (`service_state`) and the job queue (`job_states`), in words."""
    beats = pd.to_datetime(parts["heartbeat"], utc=True) if not parts.empty else pd.Series(dtype="datetime64[ns, UTC]")
    running = bool(len(beats)) and bool((pd.Timestamp(now) - beats.max()) <= ALIVE_WITHIN)
    watcher, trouble = None, False
    rows = parts[parts["part"] == "watcher"] if not parts.empty else parts
    if not rows.empty:
        row = rows.sort_values("heartbeat").iloc[-1]
        failed_at, succeeded_at = row["last error at"], row["last success"]
        trouble = bool(row["state"] == "stopped" or (
            not pd.isna(failed_at) and (pd.isna(succeeded_at) or failed_at > succeeded_at)))
        if trouble:
            since = (f"since {_when(succeeded_at)}, its last successful poll" if not pd.isna(succeeded_at)
                     else "since it started")
            watcher = (f"the watcher has not reached the Hub {since} (last try {_when(failed_at)}: "
                       f"{row['last error'] or row['state']})")
        else:
            watcher = f"the watcher is {row['state']} (last successful poll {_when(succeeded_at)})"
            if row["detail"]:
                watcher += f": {row['detail']}"
    waiting = {state: jobs.get(state, 0) for state in ("queued", "running") if jobs.get(state)}
    queue = ", ".join(f"{n} {state}" for state, n in waiting.items()) or None
    workers = parts[parts["part"] == "worker"] if not parts.empty else parts
    last_run = None if workers.empty else workers.sort_values("heartbeat").iloc[-1]["detail"]
    return ServiceSummary(running, watcher, trouble, queue, last_run if isinstance(last_run, str) else None)


CURVE_COLUMNS = ["curve", "concurrency", "speedup", "tokens_per_s", "baseline_tokens_per_s", "latency_per_token_s",
                 "tau", "crossover", "max_new_tokens", "prompt_set", "series"]


def curve_series(curve: SpeedupCurve) -> str:
    """What two curves must share to be drawn against length or kind of prompt: the pair, the server and every
    condition but those two (temperature, prompt format, thinking)."""
    c = curve.conditions
    return " · ".join(str(part) for part in (curve.target, curve.drafter, curve.engine, curve.engine_version,
                                             curve.hardware, c.temperature, c.prompt_format, c.thinking))


@kept()
def speedup_curves(db: ReadOnlyQueries) -> tuple[dict[int, str], pd.DataFrame]:
    """Each stored sweep's label and one row per (curve, concurrency), newest curve first; `crossover` marks the
    point where the drafter stops paying."""
    labels: dict[int, str] = {}
    rows = []
    for curve in db.store.curves.curves():
        assert curve.curve_id is not None
        # A curve of the tiny test models (or from a CPU) says so in its name: it is never read as a GPU's.
        unlike_serving = stand_in(curve)
        labels[curve.curve_id] = (f"{curve.drafter or 'drafter'} on {curve.target} · {curve.hardware or '?'} · "
                                  f"{curve.engine} {curve.engine_version or ''} · {curve.conditions.max_new_tokens} "
                                  f"tokens · {describe(curve)}"
                                  + (f" [{unlike_serving}]" if unlike_serving else ""))
        rows += [(curve.curve_id, p.concurrency, p.speedup, p.tokens_per_s, p.baseline_tokens_per_s,
                  p.latency_per_token_s, p.tau, p.concurrency == curve.crossover, curve.conditions.max_new_tokens,
                  curve.conditions.prompt_set, curve_series(curve)) for p in curve.points]
    return labels, pd.DataFrame(rows, columns=CURVE_COLUMNS)


@kept(LIVE_TTL_S)
def job_states(db: ReadOnlyQueries) -> dict[str, int]:
    """Verification jobs by state: {"queued": 5, "running": 1, …}."""
    _, rows = db.service.job_state_rows()
    return {str(status): int(jobs) for status, jobs in rows}


# ---- events -------------------------------------------------------------------------------------

EVENT_COLUMNS = ["id", "created_at", "type", "message", "subject", "org", "family"]


@kept()
def events(
    db: ReadOnlyQueries,
    *,
    types: Sequence[str] = (),
    orgs: Sequence[str] = (),
    families: Sequence[str] = (),
    since: date | None = None,
    limit: int = 500,
) -> pd.DataFrame:
    """Newest first, each with its payload's one-line message."""
    frame = _frame(db.catalog.event_rows(types=types, orgs=orgs, families=families, since=since, limit=limit))
    frame["message"] = [_message(payload) for payload in frame["payload"]]
    return _utc(frame[EVENT_COLUMNS], "created_at")


def _message(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return payload["message"]
    return ""


@dataclass(frozen=True)
class EventOptions:
    types: tuple[str, ...]
    orgs: tuple[str, ...]
    families: tuple[str, ...]


@kept()
def event_options(db: ReadOnlyQueries) -> EventOptions:
    types, orgs, families = db.catalog.event_option_rows()
    return EventOptions(types=types, orgs=orgs, families=families)


# ---- availability -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointOptions:
    orgs: tuple[str, ...]
    families: tuple[str, ...]
    sizes: tuple[str, ...]


@kept()
def checkpoint_options(db: ReadOnlyQueries) -> CheckpointOptions:
    orgs, families, sizes = db.catalog.checkpoint_option_rows()
    return CheckpointOptions(orgs=orgs, families=families, sizes=sizes)


AVAILABILITY_COLUMNS = [
    "checkpoint", "org", "family", "size", "method", "verdict", "drafter", "drafter_released", "released", "lag_days",
    "drafter_gone", "checkpoint_gone", "drafter_license",
]


@kept()
def availability(
    db: ReadOnlyQueries, *, orgs: Sequence[str] = (), families: Sequence[str] = (), sizes: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per (checkpoint, drafter method): the best head verdict and the drafter that holds it.

    Best = exact, declared, structural, unknown, incompatible (VERDICT_ORDER), then a drafter still on the Hub, then
    the earliest drafter. A cell no drafter of the method has a verdict for says "none". lag_days = the
    drafter's release − the checkpoint's, 0 when the dates put the drafter first (registry.lag's rule).
    drafter_gone and checkpoint_gone say "gone from the Hub since …" for a repo deleted or made private.
    """
    target_rows, best_rows = db.catalog.availability_rows(orgs=orgs, families=families, sizes=sizes)
    targets, best = _frame(target_rows), _frame(best_rows)

    methods = pd.DataFrame({"method": list(METHOD_LABELS)})
    grid = targets.merge(methods, how="cross").merge(best, on=["checkpoint_id", "method"], how="left")
    grid["verdict"] = grid["verdict"].fillna(NO_VERDICT)
    grid["drafter"] = grid["drafter"].astype(object).where(grid["drafter"].notna(), None)
    grid["released"] = [_checkpoint_release(a, b) for a, b in zip(grid["checkpoint_released"], grid["created_at_hub"])]
    grid["drafter_released"] = [
        _drafter_release(a, source, b) if isinstance(name, str) else None
        for name, a, source, b in zip(grid["drafter"], grid["drafter_released_on"], grid["drafter_source"],
                                      grid["drafter_first_seen"])
    ]
    grid["lag_days"] = _lag_days(grid["drafter_released"], grid["released"])
    grid["drafter_gone"] = _gone(grid["drafter_status"], grid["drafter_status_detail"])
    grid["checkpoint_gone"] = _gone(grid["checkpoint_status"], grid["checkpoint_status_detail"])
    return grid[AVAILABILITY_COLUMNS].reset_index(drop=True)


def _gone(statuses: Any, details: Any) -> list[str | None]:
    return [hub_presence.gone_marker(status if isinstance(status, str) else None,
                                     detail if isinstance(detail, str) else None)
            for status, detail in zip(statuses, details)]


def _lag_days(drafter_released: Any, target_released: Any) -> Any:
    return pd.array(
        [max((d - r).days, 0) if d and r else None for d, r in zip(drafter_released, target_released)],
        dtype="Int64",
    )


def _cell_text(verdict: str, drafter: Any, lag: Any, gone: Any) -> str:
    if verdict == NO_VERDICT:
        return NO_VERDICT
    name = drafter if isinstance(drafter, str) else None
    parts = (verdict, f"{name} ({gone})" if gone else name, f"{lag} d" if not pd.isna(lag) else None)
    return " · ".join(part for part in parts if part is not None)


MATRIX_FACTS = ["checkpoint", "pair", "best", "measured speedup", "published τ", "license", "engines", "org",
                "family", "size", "hub"]
MATRIX_HEAD = 3  # checkpoint, pair, best: then the coloured method columns, then the facts


def availability_matrix(cells: pd.DataFrame, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """Checkpoints × method labels, each cell "verdict · drafter name · N d" (or "none"), and per checkpoint its best
    pair (`pair`: the Pair page's link, `best`: its verdict), the best measured speedup of any of its drafters (from
    `measured`: latest_speedups), the published τ of that pair, its drafter's license and the engines this registry
    measures that drafter on. A drafter gone from the Hub reads "name (gone from the Hub since …)", and `hub` says
    the same of the checkpoint."""
    if cells.empty:
        return pd.DataFrame(columns=[*MATRIX_FACTS[:MATRIX_HEAD], *METHOD_LABELS.values(), *MATRIX_FACTS[MATRIX_HEAD:]])
    text = [_cell_text(*values) for values in zip(cells["verdict"], cells["drafter"], cells["lag_days"],
                                                  cells["drafter_gone"])]
    shaped = cells.assign(cell=text, label=cells["method"].map(METHOD_LABELS), hub=cells["checkpoint_gone"])
    matrix = shaped.pivot(index="checkpoint", columns="label", values="cell")[list(METHOD_LABELS.values())]
    ranked = shaped[shaped["verdict"] != NO_VERDICT].assign(_order=lambda f: f["verdict"].map(reports.VERDICT_ORDER))
    best = ranked.sort_values(["_order", "drafter_gone", "lag_days"], na_position="first", kind="stable")
    best = best.drop_duplicates("checkpoint").set_index("checkpoint")
    speedups: dict[str, float] = {}
    if measured is not None and not measured.empty:
        for target, value in zip(measured["target"], pd.to_numeric(measured["speedup"], errors="coerce")):
            if not pd.isna(value):
                speedups[target] = max(value, speedups.get(target, value))
    facts = shaped.drop_duplicates("checkpoint").set_index("checkpoint")[["org", "family", "size", "hub"]]
    rows = []
    for checkpoint in facts.index:
        pick = best.loc[checkpoint] if checkpoint in best.index else None
        drafter = pick["drafter"] if pick is not None else None
        band, _ = calibration.published_tau_band(checkpoint, drafter) if drafter else (None, None)
        rows.append({
            "checkpoint": checkpoint,
            "pair": f"pair?{urlencode({'target': checkpoint, 'drafter': drafter})}" if drafter else None,
            "best": pick["verdict"] if pick is not None else NO_VERDICT,
            "measured speedup": speedups.get(checkpoint),
            "published τ": (f"{band[0]:.1f}–{band[1]:.1f}" if band[0] != band[1] else f"{band[0]:.1f}") if band else None,
            "license": pick["drafter_license"] if pick is not None else None,
            "engines": ", ".join(coverage(pick["method"], None, drafter).engines) or "none yet" if drafter else None,
        })
    frame = pd.DataFrame(rows).set_index("checkpoint").join(facts).join(matrix).reset_index()
    return frame[[*MATRIX_FACTS[:MATRIX_HEAD], *METHOD_LABELS.values(), *MATRIX_FACTS[MATRIX_HEAD:]]]


@kept()
def availability_grid(db: ReadOnlyQueries, *, orgs: Sequence[str] = (), families: Sequence[str] = (),
                      sizes: Sequence[str] = ()) -> pd.DataFrame:
    """The availability matrix of the chosen checkpoints, with the newest measured speedups."""
    return availability_matrix(availability(db, orgs=orgs, families=families, sizes=sizes),
                               latest_speedups(db, limit=1000))

FIT_COLUMNS = ["rank", "drafter", "method", "publisher", "verdict", "why", "hub", "reasons", "drafter_released",
               "lag_days"]


@kept()
def drafters_for(db: ReadOnlyQueries, repo_id: str,
                 ranked: Mapping[str, tuple[int, str]] | None = None) -> pd.DataFrame:
    """What can I use with this checkpoint: every head verdict, best first (within a verdict, drafters still on
    the Hub first), with its reasons; `hub` says "gone from the Hub since …" of one deleted or made private.
    `ranked`: drafter → (position, why) of the exact ones (registry.calibration.ranking), which then come in
    that order with the reason."""
    ranked = ranked or {}
    frame = _frame(db.catalog.drafters_for_rows(repo_id))
    frame["rank"] = pd.array([ranked[d][0] if d in ranked else None for d in frame["drafter"]], dtype="Int64")
    frame["why"] = [ranked[d][1] if d in ranked else None for d in frame["drafter"]]
    if ranked:
        # Verdict first (the rows come best verdict first), then the ranking within the exact ones.
        order = frame["verdict"].map(reports.VERDICT_ORDER)
        frame = frame.assign(_order=order).sort_values(["_order", "rank"], kind="stable", na_position="last")
        frame = frame.drop(columns="_order").reset_index(drop=True)
    frame["reasons"] = ["; ".join(reasons or ()) for reasons in frame["reasons"]]
    frame["drafter_released"] = [_drafter_release(a, source, b)
                                 for a, source, b in zip(frame["released"], frame["source"], frame["first_seen"])]
    released = [_checkpoint_release(a, b) for a, b in zip(frame["checkpoint_released"], frame["created_at_hub"])]
    frame["lag_days"] = _lag_days(frame["drafter_released"], released)
    frame["hub"] = _gone(frame["status"], frame["status_detail"])
    return frame[FIT_COLUMNS]


@kept()
def ranked_drafters(db: ReadOnlyQueries, repo_id: str) -> pd.DataFrame:
    """`drafters_for` with the exact pairs in the order `find` and the API rank them (registry.calibration.ranking:
    measured speedup on the default GPU, else the priced one), each with why."""
    store = db.store
    pairs = launchable_pairs(store, repo_id)
    runs = [r for r in store.runs.list_runs(target=repo_id) if r.status == "ok"]
    records = {p.drafter: None if p.built_in else store.reads.get_drafter(p.drafter) for p in pairs}
    order = rank(pairs, runs, pick_gpu(None), None, records=records,
                 target_parameters=side_parameters(store, repo_id, pairs[0].target_sha if pairs else None))
    return drafters_for(db, repo_id, {r.pair.drafter: (position, r.why) for position, r in enumerate(order, start=1)})

# ---- lag ----------------------------------------------------------------------------------------

LAG_COLUMNS = [
    "target_repo_id", "org", "family", "released", "released_precision", "first_drafter_repo_id",
    "first_drafter_released", "publisher", "lag_days", "open", "exact_drafters", "hub_notes",
]


@dataclass(frozen=True)
class LagReport:
    targets: pd.DataFrame  # registry.reports.lag_table, one row per target, worst lag first
    timeline: pd.DataFrame  # target and drafter release points
    by_family: pd.DataFrame  # registry.reports.lag_by per family
    by_publisher: pd.DataFrame  # … per publisher of the first exact drafter


@kept()
def lag_report(db: ReadOnlyQueries, today: date) -> LagReport:
    """The lag tables of registry.reports (open lags measured up to today) as frames."""
    store = db.store
    rows = reports.lag_table(store, today)
    drafters = {d.repo_id: d for d in store.reads.drafters()}
    targets = pd.DataFrame(
        [
            {
                **asdict(row),
                "publisher": drafters[row.first_drafter_repo_id].publisher if row.first_drafter_repo_id else None,
                "hub_notes": "; ".join(row.hub_notes) or None,
            }
            for row in rows
        ],
        columns=LAG_COLUMNS,
    )
    targets["lag_days"] = targets["lag_days"].astype("Int64")
    points: list[dict[str, Any]] = []
    for row in rows:
        if row.released is None:
            continue
        points.append({"target": row.target_repo_id, "event": "target released", "repo": row.target_repo_id,
                       "date": row.released})
        for name in row.exact_drafters:
            points.append({"target": row.target_repo_id, "event": "drafter released", "repo": name,
                           "date": reports.drafter_release_date(drafters[name])})
    timeline = pd.DataFrame(points, columns=["target", "event", "repo", "date"])
    timeline["date"] = pd.to_datetime(timeline["date"])
    return LagReport(
        targets=targets,
        timeline=timeline,
        by_family=_group_frame(reports.lag_by(rows, "family"), "family"),
        by_publisher=_group_frame(reports.lag_by(rows, "publisher", store), "publisher"),
    )


@kept()
def dflash_v1(db: ReadOnlyQueries, today: date) -> pd.DataFrame:
    """z-lab's DFlash v1 drafters (the 21), each with its target, release date and the target's lag."""
    frame = _frame(db.catalog.dflash_v1_rows())
    lags = {row.target_repo_id: row.lag_days for row in reports.lag_table(db.store, today)}
    frame["target_lag_days"] = pd.array([lags.get(t) for t in frame["target"]], dtype="Int64")
    return frame


def _conditions(frame: pd.DataFrame) -> list[str]:
    """Each row's measurement conditions as one label (registry.domain.conditions), from `condition_columns`."""
    def value(row: Any, name: str) -> Any:
        item = getattr(row, name)
        return None if item is None or pd.isna(item) else item

    return [
        conditions_label(temperature=value(row, "temperature"), dtype=value(row, "dtype"),
                         draft_length=_int(value(row, "draft_length")),
                         max_new_tokens=_int(value(row, "max_new_tokens")), prompt_sets=value(row, "prompt_sets"),
                         lossless=_bool(value(row, "lossless")), model=model_kind(_bool(value(row, "test_model"))),
                         metric_version=_int(value(row, "metric_version")))
        for row in frame.itertuples(index=False)
    ]


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


@kept()
def latest_speedups(db: ReadOnlyQueries, limit: int = 20) -> pd.DataFrame:
    """The newest successful run of each series (pair, engine, hardware and measurement conditions): τ, speedup,
    losslessness, and `conditions`, the line saying what the numbers hold for. A run under other conditions is
    another row, never a replacement."""
    frame = _frame(db.benchmarks.latest_speedup_rows(limit * 10))
    frame["conditions"] = _conditions(frame)
    frame = frame.drop_duplicates(["target", "drafter", "method", "engine", "hardware", "conditions"]).head(limit)
    for column in ("target", "drafter"):
        frame[column] = [ref_label(v) if isinstance(v, str) else v for v in frame[column]]
    return frame.reset_index(drop=True)


def _group_frame(groups: dict[str, Any], key: str) -> pd.DataFrame:
    return pd.DataFrame([{key: name, **asdict(summary)} for name, summary in groups.items()])


@kept()
def upgrades(db: ReadOnlyQueries, today: date) -> pd.DataFrame:
    """registry.reports.upgrade_table: base upgrades still waiting for a drafter first, longest wait first."""
    rows = reports.upgrade_table(db.store, today)
    frame = pd.DataFrame(
        [{**asdict(row), "predecessor_drafters": ", ".join(row.predecessor_drafters)} for row in rows],
        columns=["successor_repo_id", "predecessor_repo_id", "predecessor_drafters", "released", "lag_days", "open"],
    )
    frame["lag_days"] = frame["lag_days"].astype("Int64")
    return frame


# ---- benchmarks ---------------------------------------------------------------------------------

@kept()
def benchmark_pairs(db: ReadOnlyQueries) -> pd.DataFrame:
    """(target, drafter) pairs with runs, most runs first."""
    return _utc(_frame(db.benchmarks.benchmark_pair_rows()), "last_run")


@kept()
def benchmark_summary(db: ReadOnlyQueries, *, target: str | None = None, drafter: str | None = None) -> pd.DataFrame:
    """Speedup and τ per pair, hardware, engine and prompt set over successful runs: mean, std, min, max.

    std is the population standard deviation across runs, from sums the database adds up (SQLite has no
    stddev); within_run_spread is the mean of the spread each run measured over its own repeats.
    """
    frame = _frame(db.benchmarks.benchmark_summary_rows(target=target, drafter=drafter))
    frame["conditions"] = _conditions(frame)
    for name in ("speedup", "tau"):
        mean = frame[f"{name}_mean"].astype(float)
        variance = (frame[f"_{name}_sq"].astype(float) - mean * mean).clip(lower=0)
        frame.insert(frame.columns.get_loc(f"{name}_mean") + 1, f"{name}_std", variance ** 0.5)
    return _utc(frame.drop(columns=["_speedup_sq", "_tau_sq"]), "last_run")


HISTORY_COLUMNS = [
    "run_id", "created_at", "series", "hardware", "engine", "engine_version", "metric_version", "conditions",
    "prompt_set", "speedup",
    "speedup_spread", "tau", "tau_spread", "target_revision", "drafter_revision",
]


@kept()
def benchmark_history(db: ReadOnlyQueries, target: str, drafter: str | None) -> pd.DataFrame:
    """Every successful run of one pair per prompt set, oldest first; `series` never mixes hardware, engines,
    prompt sets or measurement conditions (registry.domain.conditions, metric definitions included)."""
    frame = _frame(db.benchmarks.benchmark_history_rows(target, drafter))
    frame["conditions"] = _conditions(frame)
    frame["series"] = [
        " · ".join(str(part) if part is not None else "?" for part in parts)
        for parts in zip(frame["hardware"], frame["engine"], frame["prompt_set"], frame["conditions"], strict=True)
    ]
    return _utc(frame[HISTORY_COLUMNS], "created_at")


def revision_changes(history: pd.DataFrame) -> pd.DataFrame:
    """Within each series, the runs whose target or drafter revision differs from the run before: an in-place
    weight change that may explain a jump."""
    changes: list[dict[str, Any]] = []
    for series, runs in history.sort_values("created_at", kind="stable").groupby("series", sort=True):
        previous = None
        for row in runs.itertuples(index=False):
            if previous is not None:
                for side in ("target", "drafter"):
                    # A run with no revision reads back from the frame as NaN, which never equals itself.
                    before, after = (_revision(getattr(r, f"{side}_revision")) for r in (previous, row))
                    if before != after:
                        changes.append({
                            "created_at": row.created_at, "series": series, "side": side,
                            "change": f"{side} revision {_short(before)} → {_short(after)}", "run_id": row.run_id,
                        })
            previous = row
    frame = pd.DataFrame(changes, columns=["created_at", "series", "side", "change", "run_id"])
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    return frame


def _revision(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _short(revision: str | None) -> str:
    return "none" if revision is None else revision[:10]


@kept()
def acceptance_by_position(db: ReadOnlyQueries, run_id: str) -> pd.DataFrame:
    """A run's per-position acceptance on each prompt set (position 1 = the first drafted token)."""
    points = [
        {"prompt_set": prompt_set, "position": position, "acceptance": float(value)}
        for prompt_set, rates in _frame(db.benchmarks.acceptance_rows(run_id)).itertuples(index=False)
        for position, value in enumerate(rates or (), start=1)
    ]
    return pd.DataFrame(points, columns=["prompt_set", "position", "acceptance"])


@kept()
def runs(db: ReadOnlyQueries, *, target: str | None = None, drafter: str | None = None, status: str | None = None,
         limit: int = 1000) -> pd.DataFrame:
    """Runs newest first, failed ones with their reason."""
    frame = _frame(db.benchmarks.run_rows(target=target, drafter=drafter, status=status, limit=limit))
    return _utc(frame, "created_at")


PREDICTION_COLUMNS = [
    "run_id", "predicted_baseline_tokens_per_s", "baseline_error", "predicted_tokens_per_s", "tokens_per_s_error",
    "predicted_speedup", "speedup_error", "prediction_note", "prediction_basis", "prediction_source",
]


@kept()
def run_predictions(db: ReadOnlyQueries, *, target: str | None = None, drafter: str | None = None,
                    limit: int = 1000) -> pd.DataFrame:
    """The pricing model's prediction of each run and its errors (predicted / measured − 1), newest first: the
    one stored with the run when the current model made it, else computed now from the other runs (this reads
    only). A run the model cannot predict has empty numbers and says why in prediction_note."""
    store = db.store
    records = store.runs.list_runs(target=target, drafter=drafter, limit=limit)
    if target is not None:
        records = [r for r in records if r.drafter == drafter]  # drafter None: the target's baseline runs
    predictions = calibration.current_predictions(store, records)
    rows = []
    for record in records:
        p = predictions[record.run_id]
        rows.append({
            "run_id": record.run_id,
            "predicted_baseline_tokens_per_s": p.predicted_baseline_tokens_per_s, "baseline_error": p.baseline_error,
            "predicted_tokens_per_s": p.predicted_tokens_per_s, "tokens_per_s_error": p.tokens_per_s_error,
            "predicted_speedup": p.predicted_speedup, "speedup_error": p.speedup_error,
            "prediction_note": p.note, "prediction_basis": p.device_basis,
            "prediction_source": ("stored with the run" if p == calibration.stored_prediction(record)
                                  else "computed on read"),
        })
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)


# ---- one pair -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairVerdict:
    verdict: str
    reasons: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]
    checkpoint_sha: str
    drafter_sha: str
    checked_at: datetime


@kept()
def pair_choices(db: ReadOnlyQueries) -> pd.DataFrame:
    """(target, drafter) pairs with a head verdict or a run, best verdict first."""
    judged, measured = db.catalog.pair_choice_rows()
    frame = pd.concat([_frame(judged), _frame(measured)], ignore_index=True)
    frame = frame.sort_values(
        ["target", "drafter", "verdict"], key=lambda col: col.map(reports.VERDICT_ORDER) if col.name == "verdict" else col,
        na_position="last",
    )
    return frame.drop_duplicates(["target", "drafter"]).reset_index(drop=True)


@kept()
def pair_verdict(db: ReadOnlyQueries, target: str, drafter: str) -> PairVerdict | None:
    row = db.catalog.pair_verdict_row(target, drafter)
    if row is None:
        return None
    return PairVerdict(
        verdict=row["verdict"],
        reasons=tuple(row["reasons"] or ()),
        checks=tuple(row["checks"] or ()),
        checkpoint_sha=row["checkpoint_sha"],
        drafter_sha=row["drafter_sha"],
        checked_at=aware(row["checked_at"]),
    )


@kept()
def gone_notes(db: ReadOnlyQueries, target: str, drafter: str) -> tuple[str, ...]:
    """"the drafter … is gone from the Hub since …" for each side of the pair deleted or made private."""
    notes = []
    for row in db.catalog.hub_status_rows(target, drafter):
        marker = hub_presence.gone_marker(row["status"], row["status_detail"])
        if marker is not None:
            notes.append(f"the {row['role']} {row['repo_id']} is {marker}: its history is kept, but it cannot be "
                         "downloaded now")
    return tuple(notes)


@kept()
def checkpoint_revisions(db: ReadOnlyQueries, repo_id: str) -> pd.DataFrame:
    return _utc(_frame(db.catalog.checkpoint_revision_rows(repo_id)), "seen_at", "last_modified")


@kept()
def drafter_revisions(db: ReadOnlyQueries, repo_id: str) -> pd.DataFrame:
    return _utc(_frame(db.catalog.drafter_revision_rows(repo_id)), "seen_at", "last_modified")


@kept()
def side_facts(db: ReadOnlyQueries, ref: str, drafter: bool) -> SideFacts:
    """One side's size and config as `drafters price` reads it (registry.calibration.side_facts)."""
    return calibration.side_facts(db.store, ref, drafter=drafter)


@kept()
def pair_acceptance(db: ReadOnlyQueries, target: str, drafter: str) -> tuple[pricing.Acceptance | None, str | None]:
    """What prices the pair, as `drafters price` chooses it: the newest measured run's per-position acceptance, else
    a published τ (labelled "published, not measured"); else None and why."""
    try:
        return calibration.measured_acceptance(db.store, target, drafter), None
    except calibration.PricingInputError as missing:
        published = calibration.published_acceptance(target, drafter)
        return (published, None) if published is not None else (None, str(missing))


@kept()
def local_verdict(target: str, drafter: str) -> PairVerdict | None:
    """The verdict between two local folders, read from their files as `drafters check` does; None when either
    folder is gone. Folders declare nothing, so the best they reach is "structural"."""
    try:
        target_repo, drafter_repo = read_local_repo(Path(target)), read_local_repo(Path(drafter))
    except (LocalRepoError, OSError):
        return None
    result = pair.judge(drafter_repo.side(), target_repo.side())
    return PairVerdict(verdict=result.verdict, reasons=result.reasons, checks=tuple(pair.checks_json(result)),
                       checkpoint_sha="local folder", drafter_sha="local folder", checked_at=datetime.now(UTC))
