"""Read-only queries behind the dashboard: SELECTs that aggregate in the database, returned as DataFrames.

Nothing here writes. `open_read_only` makes that a property of the connection too (SQLite `query_only`,
PostgreSQL read-only transactions), so a dashboard bug cannot change the registry, and the dashboard also works
under a PostgreSQL role that may only SELECT.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, Select, case, event, func, literal, or_, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import aliased

from registry import calibration, reports
from registry.store.db import DatabaseError, current_revision, head_revision, make_engine
from registry.store.models import (
    BenchmarkRun,
    Checkpoint,
    CheckpointAlias,
    CheckpointRevision,
    Compatibility,
    Drafter,
    DrafterRevision,
    DrafterTarget,
    Event,
    RunSetResult,
)
from registry.store.runs import list_runs
from registry.store import Store, aware

METHOD_LABELS: dict[str, str] = {
    "dflash": "DFlash",
    "dflash2": "DFlash 2",
    "dspark": "DSpark",
    "gemma4-assistant": "Gemma-4 assistant",
    "eagle3": "EAGLE-3",
    "draft-lm": "draft-LM",
}
NO_VERDICT = "none"
FILL_COMMANDS = "`drafters catalog load`, `drafters watch --once` or `drafters verify …`"


class DatabaseMissing(DatabaseError):
    """No registry database at the configured URL yet; the message says which command creates one."""


# ---- connection ---------------------------------------------------------------------------------


def _read_only_sqlite(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA query_only=ON")
    cursor.close()


def _read_only_postgresql(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    cursor.close()
    dbapi_connection.commit()


def open_read_only(url: str) -> Engine:
    """An engine whose connections refuse writes. Never creates or upgrades a database."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if not database or database == ":memory:" or not Path(database).expanduser().is_file():
            raise DatabaseMissing(f"no registry database at {database or url}: run {FILL_COMMANDS} to create one")
    engine = make_engine(url)
    listener = _read_only_sqlite if engine.dialect.name == "sqlite" else _read_only_postgresql
    event.listen(engine, "connect", listener)
    return engine


def schema_problem(engine: Engine) -> str | None:
    """Why the dashboard cannot read this database, or None when its schema is current."""
    try:
        found = current_revision(engine)
    except SQLAlchemyError as exc:
        return f"cannot read the database: {' '.join(str(getattr(exc, 'orig', None) or exc).split())}"
    expected = head_revision()
    if found is None:
        return f"the database has no registry schema yet: run {FILL_COMMANDS}"
    if found != expected:
        return f"the database schema is at {found}, this dashboard needs {expected}: run `drafters db upgrade`"
    return None


def _frame(engine: Engine, query: Select[Any]) -> pd.DataFrame:
    with engine.connect() as connection:
        result = connection.execute(query)
        # Plain tuples: pandas reads Row objects column by column with one shared dtype, which can make it
        # coerce a text column to float ("job4").
        return pd.DataFrame([tuple(row) for row in result.all()], columns=list(result.keys()))


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


def _release(primary: Any, fallback: Any) -> date | None:
    """The release rule of registry.reports, on raw columns: the published date, else the fallback's day
    (a drafter's first_seen, a checkpoint's created_at_hub)."""
    return _as_date(primary) or _as_date(fallback)


# ---- head revisions and their verdicts -----------------------------------------------------------


def _checkpoint_head_id() -> Any:
    """The head revision of the Checkpoint row in the enclosing query: the one whose sha is the head sha, else
    the newest stored (the rule of Store._head)."""
    revision = aliased(CheckpointRevision)
    by_sha = (
        select(revision.id)
        .where(revision.checkpoint_id == Checkpoint.id, revision.sha == Checkpoint.head_sha)
        .scalar_subquery()
    )
    newest = select(func.max(revision.id)).where(revision.checkpoint_id == Checkpoint.id).scalar_subquery()
    return func.coalesce(by_sha, newest)


def _drafter_head_id() -> Any:
    revision = aliased(DrafterRevision)
    by_sha = (
        select(revision.id).where(revision.drafter_id == Drafter.id, revision.sha == Drafter.head_sha).scalar_subquery()
    )
    newest = select(func.max(revision.id)).where(revision.drafter_id == Drafter.id).scalar_subquery()
    return func.coalesce(by_sha, newest)


def _head_verdicts() -> Any:
    """Every stored verdict between a drafter's head revision and a checkpoint's head revision.

    Driven from the compatibility rows, so the head lookups run once per stored verdict rather than once per
    (checkpoint, drafter) combination."""
    checkpoint_revision, drafter_revision = aliased(CheckpointRevision), aliased(DrafterRevision)
    return (
        select(
            Checkpoint.id.label("checkpoint_id"),
            Drafter.id.label("drafter_id"),
            Compatibility.verdict,
            Compatibility.reasons,
            Compatibility.checks,
            Compatibility.checked_at,
            Compatibility.checkpoint_revision_id,
            Compatibility.drafter_revision_id,
        )
        .join(checkpoint_revision, checkpoint_revision.id == Compatibility.checkpoint_revision_id)
        .join(Checkpoint, Checkpoint.id == checkpoint_revision.checkpoint_id)
        .join(drafter_revision, drafter_revision.id == Compatibility.drafter_revision_id)
        .join(Drafter, Drafter.id == drafter_revision.drafter_id)
        .where(checkpoint_revision.id == _checkpoint_head_id(), drafter_revision.id == _drafter_head_id())
        .subquery("head_verdict")
    )


def _verdict_rank(column: Any) -> Any:
    return case(reports.VERDICT_ORDER, value=column, else_=len(reports.VERDICT_ORDER))


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


def _open_lag_targets() -> Select[Any]:
    """Checkpoints some drafter declares (directly or through an old name) that have no exact drafter yet."""
    declared = select(Checkpoint.id).where(
        or_(
            Checkpoint.repo_id.in_(select(DrafterTarget.target_repo_id)),
            Checkpoint.id.in_(
                select(CheckpointAlias.checkpoint_id).join(
                    DrafterTarget, DrafterTarget.target_repo_id == CheckpointAlias.alias
                )
            ),
        )
    )
    verdicts = _head_verdicts()
    exact = select(verdicts.c.checkpoint_id).where(verdicts.c.verdict == "exact")
    return declared.where(Checkpoint.id.not_in(exact))


def counts(engine: Engine) -> Counts:
    verdicts = _head_verdicts()
    query = select(
        select(func.count()).select_from(Checkpoint).scalar_subquery().label("targets"),
        select(func.count()).select_from(Drafter).scalar_subquery().label("drafters"),
        select(func.count()).select_from(verdicts).where(verdicts.c.verdict == "exact").scalar_subquery().label(
            "exact_pairs"
        ),
        select(func.count()).select_from(_open_lag_targets().subquery()).scalar_subquery().label("open_lags"),
        select(func.count()).select_from(BenchmarkRun).scalar_subquery().label("runs"),
        select(func.count())
        .select_from(BenchmarkRun)
        .where(BenchmarkRun.status != "ok")
        .scalar_subquery()
        .label("failed_runs"),
        select(func.count()).select_from(Event).scalar_subquery().label("events"),
        select(func.count()).select_from(Drafter).where(Drafter.in_21.is_(True)).scalar_subquery().label("dflash_v1"),
    )
    with engine.connect() as connection:
        row = connection.execute(query).one()
    return Counts(**{key: int(value or 0) for key, value in row._mapping.items()})


# ---- events -------------------------------------------------------------------------------------

EVENT_COLUMNS = ["id", "created_at", "type", "message", "subject", "org", "family"]


def events(
    engine: Engine,
    *,
    types: Sequence[str] = (),
    orgs: Sequence[str] = (),
    families: Sequence[str] = (),
    since: date | None = None,
    limit: int = 500,
) -> pd.DataFrame:
    """Newest first, each with its payload's one-line message."""
    query = select(Event.id, Event.created_at, Event.type, Event.subject, Event.org, Event.family, Event.payload)
    if types:
        query = query.where(Event.type.in_(list(types)))
    if orgs:
        query = query.where(Event.org.in_(list(orgs)))
    if families:
        query = query.where(Event.family.in_(list(families)))
    if since is not None:
        query = query.where(Event.created_at >= datetime(since.year, since.month, since.day, tzinfo=UTC))
    frame = _frame(engine, query.order_by(Event.id.desc()).limit(limit))
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


def _distinct(engine: Engine, *columns: Any) -> list[tuple[str, ...]]:
    """The distinct non-null values of each column, sorted."""
    with engine.connect() as connection:
        return [
            tuple(connection.execute(select(column).where(column.is_not(None)).distinct().order_by(column)).scalars())
            for column in columns
        ]


def event_options(engine: Engine) -> EventOptions:
    types, orgs, families = _distinct(engine, Event.type, Event.org, Event.family)
    return EventOptions(types=types, orgs=orgs, families=families)


# ---- availability -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointOptions:
    orgs: tuple[str, ...]
    families: tuple[str, ...]
    sizes: tuple[str, ...]


def checkpoint_options(engine: Engine) -> CheckpointOptions:
    orgs, families, sizes = _distinct(engine, Checkpoint.org, Checkpoint.family, Checkpoint.size)
    return CheckpointOptions(orgs=orgs, families=families, sizes=sizes)


AVAILABILITY_COLUMNS = [
    "checkpoint", "org", "family", "size", "method", "verdict", "drafter", "drafter_released", "released", "lag_days",
]


def availability(
    engine: Engine, *, orgs: Sequence[str] = (), families: Sequence[str] = (), sizes: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per (checkpoint, drafter method): the best head verdict and the drafter that holds it.

    Best = exact before structural before unknown before incompatible, then the earliest drafter. A cell no
    drafter of the method has a verdict for says "none". lag_days = the drafter's release − the checkpoint's,
    0 when the dates put the drafter first (registry.lag's rule).
    """
    checkpoints = select(
        Checkpoint.id.label("checkpoint_id"),
        Checkpoint.repo_id.label("checkpoint"),
        Checkpoint.org,
        Checkpoint.family,
        Checkpoint.size,
        Checkpoint.released.label("checkpoint_released"),
        Checkpoint.created_at_hub,
    )
    if orgs:
        checkpoints = checkpoints.where(Checkpoint.org.in_(list(orgs)))
    if families:
        checkpoints = checkpoints.where(Checkpoint.family.in_(list(families)))
    if sizes:
        checkpoints = checkpoints.where(Checkpoint.size.in_(list(sizes)))
    targets = _frame(engine, checkpoints.order_by(Checkpoint.repo_id))

    verdicts = _head_verdicts()
    ranked = (
        select(
            verdicts.c.checkpoint_id,
            Drafter.method,
            verdicts.c.verdict,
            Drafter.repo_id.label("drafter"),
            Drafter.released.label("drafter_released_on"),
            Drafter.first_seen.label("drafter_first_seen"),
            func.row_number()
            .over(
                partition_by=(verdicts.c.checkpoint_id, Drafter.method),
                order_by=(
                    _verdict_rank(verdicts.c.verdict),
                    Drafter.released.asc().nulls_last(),
                    Drafter.first_seen,
                    Drafter.repo_id,
                ),
            )
            .label("place"),
        )
        .join(Drafter, Drafter.id == verdicts.c.drafter_id)
        .subquery("ranked")
    )
    best_query = select(ranked).where(ranked.c.place == 1)
    if orgs or families or sizes:
        best_query = best_query.where(ranked.c.checkpoint_id.in_(checkpoints.with_only_columns(Checkpoint.id)))
    best = _frame(engine, best_query)

    methods = pd.DataFrame({"method": list(METHOD_LABELS)})
    grid = targets.merge(methods, how="cross").merge(best, on=["checkpoint_id", "method"], how="left")
    grid["verdict"] = grid["verdict"].fillna(NO_VERDICT)
    grid["drafter"] = grid["drafter"].astype(object).where(grid["drafter"].notna(), None)
    grid["released"] = [_release(a, b) for a, b in zip(grid["checkpoint_released"], grid["created_at_hub"])]
    grid["drafter_released"] = [
        _release(a, b) if isinstance(name, str) else None
        for name, a, b in zip(grid["drafter"], grid["drafter_released_on"], grid["drafter_first_seen"])
    ]
    grid["lag_days"] = _lag_days(grid["drafter_released"], grid["released"])
    return grid[AVAILABILITY_COLUMNS].reset_index(drop=True)


def _lag_days(drafter_released: Any, target_released: Any) -> Any:
    return pd.array(
        [max((d - r).days, 0) if d and r else None for d, r in zip(drafter_released, target_released)],
        dtype="Int64",
    )


def availability_matrix(cells: pd.DataFrame) -> pd.DataFrame:
    """Checkpoints × method labels, each cell "verdict · drafter · N d" (or "none")."""
    if cells.empty:
        return pd.DataFrame(columns=["checkpoint", "org", "family", "size", *METHOD_LABELS.values()])
    text = [
        NO_VERDICT
        if verdict == NO_VERDICT
        else " · ".join(
            part for part in (verdict, drafter, f"{lag} d" if not pd.isna(lag) else None) if part is not None
        )
        for verdict, drafter, lag in zip(cells["verdict"], cells["drafter"], cells["lag_days"])
    ]
    shaped = cells.assign(cell=text, method=cells["method"].map(METHOD_LABELS))
    matrix = shaped.pivot(index="checkpoint", columns="method", values="cell")[list(METHOD_LABELS.values())]
    facts = shaped.drop_duplicates("checkpoint").set_index("checkpoint")[["org", "family", "size"]]
    return facts.join(matrix).reset_index()


def resolve_checkpoint(engine: Engine, repo_id: str) -> str | None:
    """The stored repo id for a repo id or an old name of it."""
    query = select(Checkpoint.repo_id).where(
        or_(
            Checkpoint.repo_id == repo_id,
            Checkpoint.id.in_(select(CheckpointAlias.checkpoint_id).where(CheckpointAlias.alias == repo_id)),
        )
    )
    with engine.connect() as connection:
        return connection.execute(query).scalar()


def search_checkpoints(engine: Engine, text: str, limit: int = 20) -> list[str]:
    """Repo ids containing `text`, any case; % and _ in it match themselves."""
    escaped = text.strip().lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    query = (
        select(Checkpoint.repo_id)
        .where(func.lower(Checkpoint.repo_id).like(f"%{escaped}%", escape="\\"))
        .order_by(Checkpoint.repo_id)
        .limit(limit)
    )
    with engine.connect() as connection:
        return list(connection.execute(query).scalars())


FIT_COLUMNS = ["drafter", "method", "publisher", "verdict", "reasons", "drafter_released", "lag_days"]


def drafters_for(engine: Engine, repo_id: str) -> pd.DataFrame:
    """What can I use with this checkpoint: every head verdict, best first, with its reasons."""
    verdicts = _head_verdicts()
    query = (
        select(
            Drafter.repo_id.label("drafter"),
            Drafter.method,
            Drafter.publisher,
            verdicts.c.verdict,
            verdicts.c.reasons,
            Drafter.released,
            Drafter.first_seen,
            Checkpoint.released.label("checkpoint_released"),
            Checkpoint.created_at_hub,
        )
        .join(Drafter, Drafter.id == verdicts.c.drafter_id)
        .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
        .where(Checkpoint.repo_id == (resolve_checkpoint(engine, repo_id) or repo_id))
        .order_by(_verdict_rank(verdicts.c.verdict), Drafter.method, Drafter.repo_id)
    )
    frame = _frame(engine, query)
    frame["reasons"] = ["; ".join(reasons or ()) for reasons in frame["reasons"]]
    frame["drafter_released"] = [_release(a, b) for a, b in zip(frame["released"], frame["first_seen"])]
    released = [_release(a, b) for a, b in zip(frame["checkpoint_released"], frame["created_at_hub"])]
    frame["lag_days"] = _lag_days(frame["drafter_released"], released)
    return frame[FIT_COLUMNS]


# ---- lag ----------------------------------------------------------------------------------------

LAG_COLUMNS = [
    "target_repo_id", "org", "family", "released", "released_precision", "first_drafter_repo_id",
    "first_drafter_released", "publisher", "lag_days", "open", "exact_drafters",
]


@dataclass(frozen=True)
class LagReport:
    targets: pd.DataFrame  # registry.reports.lag_table, one row per target, worst lag first
    timeline: pd.DataFrame  # target and drafter release points
    by_family: pd.DataFrame  # registry.reports.lag_by per family
    by_publisher: pd.DataFrame  # … per publisher of the first exact drafter


def lag_report(engine: Engine, today: date) -> LagReport:
    """The lag tables of registry.reports (open lags measured up to today) as frames."""
    store = Store(engine)
    rows = reports.lag_table(store, today)
    drafters = {d.repo_id: d for d in store.drafters()}
    targets = pd.DataFrame(
        [
            {
                **asdict(row),
                "publisher": drafters[row.first_drafter_repo_id].publisher if row.first_drafter_repo_id else None,
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


def dflash_v1(engine: Engine, today: date) -> pd.DataFrame:
    """z-lab's DFlash v1 drafters (the 21), each with its target, release date and the target's lag."""
    query = (
        select(Drafter.repo_id, DrafterTarget.target_repo_id, Drafter.family, Drafter.released, Drafter.block_size)
        .join(DrafterTarget, DrafterTarget.drafter_id == Drafter.id, isouter=True)
        .where(Drafter.in_21.is_(True))
        .order_by(Drafter.family, Drafter.repo_id)
    )
    with engine.connect() as connection:
        frame = pd.DataFrame(connection.execute(query).all(),
                             columns=["drafter", "target", "family", "released", "block_size"])
    lags = {row.target_repo_id: row.lag_days for row in reports.lag_table(Store(engine), today)}
    frame["target_lag_days"] = pd.array([lags.get(t) for t in frame["target"]], dtype="Int64")
    return frame


def latest_speedups(engine: Engine, limit: int = 20) -> pd.DataFrame:
    """The newest successful run of each (target, drafter, engine, hardware): τ, speedup, losslessness."""
    query = (
        select(BenchmarkRun.target, BenchmarkRun.drafter, BenchmarkRun.method, BenchmarkRun.engine,
               BenchmarkRun.hardware, BenchmarkRun.tau, BenchmarkRun.speedup, BenchmarkRun.lossless,
               BenchmarkRun.created_at)
        .where(BenchmarkRun.status == "ok")
        .order_by(BenchmarkRun.created_at.desc())
        .limit(limit * 10)
    )
    with engine.connect() as connection:
        frame = pd.DataFrame(connection.execute(query).all(),
                             columns=["target", "drafter", "method", "engine", "hardware", "tau", "speedup",
                                      "lossless", "created_at"])
    frame = frame.drop_duplicates(["target", "drafter", "engine", "hardware"]).head(limit)
    for column in ("target", "drafter"):
        frame[column] = [Path(v).name if isinstance(v, str) and v.startswith("/") else v for v in frame[column]]
    return frame.reset_index(drop=True)


def _group_frame(groups: dict[str, Any], key: str) -> pd.DataFrame:
    return pd.DataFrame([{key: name, **asdict(summary)} for name, summary in groups.items()])


def upgrades(engine: Engine, today: date) -> pd.DataFrame:
    """registry.reports.upgrade_table: base upgrades still waiting for a drafter first, longest wait first."""
    rows = reports.upgrade_table(Store(engine), today)
    frame = pd.DataFrame(
        [{**asdict(row), "predecessor_drafters": ", ".join(row.predecessor_drafters)} for row in rows],
        columns=["successor_repo_id", "predecessor_repo_id", "predecessor_drafters", "released", "lag_days", "open"],
    )
    frame["lag_days"] = frame["lag_days"].astype("Int64")
    return frame


# ---- benchmarks ---------------------------------------------------------------------------------

def benchmark_pairs(engine: Engine) -> pd.DataFrame:
    """(target, drafter) pairs with runs, most runs first."""
    query = (
        select(
            BenchmarkRun.target,
            BenchmarkRun.drafter,
            func.count().label("runs"),
            func.sum(case((BenchmarkRun.status == "ok", 1), else_=0)).label("ok_runs"),
            func.max(BenchmarkRun.created_at).label("last_run"),
        )
        .group_by(BenchmarkRun.target, BenchmarkRun.drafter)
        .order_by(func.count().desc(), BenchmarkRun.target, BenchmarkRun.drafter)
    )
    return _utc(_frame(engine, query), "last_run")


def _metric_version() -> Any:
    """The metric definitions a run was measured under (runs stored before versions existed are version 1)."""
    return func.coalesce(BenchmarkRun.metrics["metric_version"].as_integer(), 1)


def benchmark_summary(engine: Engine, *, target: str | None = None, drafter: str | None = None) -> pd.DataFrame:
    """Speedup and τ per pair, hardware, engine and prompt set over successful runs: mean, std, min, max.

    std is the population standard deviation across runs, from sums the database adds up (SQLite has no
    stddev); within_run_spread is the mean of the spread each run measured over its own repeats.
    """
    columns = (BenchmarkRun.target, BenchmarkRun.drafter, BenchmarkRun.method, BenchmarkRun.hardware,
               BenchmarkRun.engine, RunSetResult.prompt_set, _metric_version().label("metric_version"))
    query = (
        select(
            *columns,
            func.count().label("runs"),
            func.avg(RunSetResult.speedup).label("speedup_mean"),
            func.avg(RunSetResult.speedup * RunSetResult.speedup).label("_speedup_sq"),
            func.min(RunSetResult.speedup).label("speedup_min"),
            func.max(RunSetResult.speedup).label("speedup_max"),
            func.avg(RunSetResult.speedup_spread).label("speedup_within_run_spread"),
            func.avg(RunSetResult.tau).label("tau_mean"),
            func.avg(RunSetResult.tau * RunSetResult.tau).label("_tau_sq"),
            func.min(RunSetResult.tau).label("tau_min"),
            func.max(RunSetResult.tau).label("tau_max"),
            func.max(BenchmarkRun.created_at).label("last_run"),
        )
        .join(RunSetResult, RunSetResult.run_pk == BenchmarkRun.id)
        .where(BenchmarkRun.status == "ok")
        .group_by(*columns)
        .order_by(*columns)
    )
    if target is not None:
        query = query.where(BenchmarkRun.target == target)
    if drafter is not None:
        query = query.where(BenchmarkRun.drafter == drafter)
    frame = _frame(engine, query)
    for name in ("speedup", "tau"):
        mean = frame[f"{name}_mean"].astype(float)
        variance = (frame[f"_{name}_sq"].astype(float) - mean * mean).clip(lower=0)
        frame.insert(frame.columns.get_loc(f"{name}_mean") + 1, f"{name}_std", variance ** 0.5)
    return _utc(frame.drop(columns=["_speedup_sq", "_tau_sq"]), "last_run")


HISTORY_COLUMNS = [
    "run_id", "created_at", "series", "hardware", "engine", "engine_version", "metric_version", "prompt_set", "speedup",
    "speedup_spread", "tau", "tau_spread", "target_revision", "drafter_revision",
]


def benchmark_history(engine: Engine, target: str, drafter: str | None) -> pd.DataFrame:
    """Every successful run of one pair per prompt set, oldest first; `series` never mixes hardware, engines,
    metric definitions or prompt sets."""
    query = (
        select(
            BenchmarkRun.run_id, BenchmarkRun.created_at, BenchmarkRun.hardware, BenchmarkRun.engine,
            BenchmarkRun.engine_version, _metric_version().label("metric_version"), RunSetResult.prompt_set,
            RunSetResult.speedup, RunSetResult.speedup_spread, RunSetResult.tau, RunSetResult.tau_spread,
            BenchmarkRun.target_revision, BenchmarkRun.drafter_revision,
        )
        .join(RunSetResult, RunSetResult.run_pk == BenchmarkRun.id)
        .where(BenchmarkRun.status == "ok", BenchmarkRun.target == target, _drafter_is(drafter))
        .order_by(BenchmarkRun.created_at, BenchmarkRun.id, RunSetResult.prompt_set)
    )
    frame = _frame(engine, query)
    frame["series"] = [
        " · ".join(str(part) if part is not None else "?" for part in parts)
        for parts in zip(frame["hardware"], frame["engine"], [f"metrics v{v}" for v in frame["metric_version"]],
                         frame["prompt_set"], strict=True)
    ]
    return _utc(frame[HISTORY_COLUMNS], "created_at")


def _drafter_is(drafter: str | None) -> Any:
    return BenchmarkRun.drafter.is_(None) if drafter is None else BenchmarkRun.drafter == drafter


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


def acceptance_by_position(engine: Engine, run_id: str) -> pd.DataFrame:
    """A run's per-position acceptance on each prompt set (position 1 = the first drafted token)."""
    query = (
        select(RunSetResult.prompt_set, RunSetResult.per_position_acceptance)
        .join(BenchmarkRun, BenchmarkRun.id == RunSetResult.run_pk)
        .where(BenchmarkRun.run_id == run_id)
        .order_by(RunSetResult.prompt_set)
    )
    points = [
        {"prompt_set": prompt_set, "position": position, "acceptance": float(value)}
        for prompt_set, rates in _frame(engine, query).itertuples(index=False)
        for position, value in enumerate(rates or (), start=1)
    ]
    return pd.DataFrame(points, columns=["prompt_set", "position", "acceptance"])


RUN_COLUMNS = [
    "run_id", "created_at", "status", "failure_reason", "method", "hardware", "engine", "engine_version",
    "target_revision", "drafter_revision", "draft_length", "temperature", "dtype", "lossless", "tau",
    "acceptance_rate", "speedup", "tokens_per_s", "baseline_tokens_per_s", "peak_memory_bytes",
    "target_weight_bytes", "drafter_weight_bytes",
]


def runs(engine: Engine, *, target: str | None = None, drafter: str | None = None, status: str | None = None,
         limit: int = 1000) -> pd.DataFrame:
    """Runs newest first, failed ones with their reason."""
    query = select(*(getattr(BenchmarkRun, name) for name in RUN_COLUMNS), BenchmarkRun.target, BenchmarkRun.drafter)
    if target is not None:
        query = query.where(BenchmarkRun.target == target, _drafter_is(drafter))
    if status is not None:
        query = query.where(BenchmarkRun.status == status)
    frame = _frame(engine, query.order_by(BenchmarkRun.created_at.desc(), BenchmarkRun.id.desc()).limit(limit))
    return _utc(frame, "created_at")


PREDICTION_COLUMNS = [
    "run_id", "predicted_baseline_tokens_per_s", "baseline_error", "predicted_tokens_per_s", "tokens_per_s_error",
    "predicted_speedup", "speedup_error", "prediction_note", "prediction_basis", "prediction_source",
]


def run_predictions(engine: Engine, *, target: str | None = None, drafter: str | None = None,
                    limit: int = 1000) -> pd.DataFrame:
    """The pricing model's prediction of each run and its errors (predicted / measured − 1), newest first: the
    one stored with the run when the current model made it, else computed now from the other runs (this reads
    only). A run the model cannot predict has empty numbers and says why in prediction_note."""
    store = Store(engine)
    records = list_runs(store, target=target, drafter=drafter, limit=limit)
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


def pair_choices(engine: Engine) -> pd.DataFrame:
    """(target, drafter) pairs with a head verdict or a run, best verdict first."""
    verdicts = _head_verdicts()
    judged = (
        select(Checkpoint.repo_id.label("target"), Drafter.repo_id.label("drafter"), verdicts.c.verdict)
        .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
        .join(Drafter, Drafter.id == verdicts.c.drafter_id)
    )
    measured = select(BenchmarkRun.target, BenchmarkRun.drafter, literal(None).label("verdict")).where(
        BenchmarkRun.drafter.is_not(None)
    ).distinct()
    frame = pd.concat([_frame(engine, judged), _frame(engine, measured)], ignore_index=True)
    frame = frame.sort_values(
        ["target", "drafter", "verdict"], key=lambda col: col.map(reports.VERDICT_ORDER) if col.name == "verdict" else col,
        na_position="last",
    )
    return frame.drop_duplicates(["target", "drafter"]).reset_index(drop=True)


def pair_verdict(engine: Engine, target: str, drafter: str) -> PairVerdict | None:
    verdicts = _head_verdicts()
    query = (
        select(verdicts.c.verdict, verdicts.c.reasons, verdicts.c.checks, verdicts.c.checked_at,
               CheckpointRevision.sha.label("checkpoint_sha"), DrafterRevision.sha.label("drafter_sha"))
        .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
        .join(Drafter, Drafter.id == verdicts.c.drafter_id)
        .join(CheckpointRevision, CheckpointRevision.id == verdicts.c.checkpoint_revision_id)
        .join(DrafterRevision, DrafterRevision.id == verdicts.c.drafter_revision_id)
        .where(Checkpoint.repo_id == (resolve_checkpoint(engine, target) or target), Drafter.repo_id == drafter)
    )
    with engine.connect() as connection:
        row = connection.execute(query).first()
    if row is None:
        return None
    return PairVerdict(
        verdict=row.verdict,
        reasons=tuple(row.reasons or ()),
        checks=tuple(row.checks or ()),
        checkpoint_sha=row.checkpoint_sha,
        drafter_sha=row.drafter_sha,
        checked_at=aware(row.checked_at),
    )


REVISION_COLUMNS = ["sha", "seen_at", "last_modified", "weight_bytes", "weight_digest", "config_problem"]


def checkpoint_revisions(engine: Engine, repo_id: str) -> pd.DataFrame:
    query = (
        select(*(getattr(CheckpointRevision, name) for name in REVISION_COLUMNS), CheckpointRevision.parameter_count,
               (CheckpointRevision.sha == Checkpoint.head_sha).label("head"))
        .join(Checkpoint, Checkpoint.id == CheckpointRevision.checkpoint_id)
        .where(Checkpoint.repo_id == (resolve_checkpoint(engine, repo_id) or repo_id))
        .order_by(CheckpointRevision.id)
    )
    return _utc(_frame(engine, query), "seen_at", "last_modified")


def drafter_revisions(engine: Engine, repo_id: str) -> pd.DataFrame:
    query = (
        select(*(getattr(DrafterRevision, name) for name in REVISION_COLUMNS), DrafterRevision.block_size,
               (DrafterRevision.sha == Drafter.head_sha).label("head"))
        .join(Drafter, Drafter.id == DrafterRevision.drafter_id)
        .where(Drafter.repo_id == repo_id)
        .order_by(DrafterRevision.id)
    )
    return _utc(_frame(engine, query), "seen_at", "last_modified")


@dataclass(frozen=True)
class WeightFacts:
    """What the head revision tells about a repo's weights, for registry.memory."""

    repo_id: str
    parameter_count: int | None
    weight_bytes: int | None
    config: dict[str, Any] | None
    size_label: str | None


def checkpoint_weights(engine: Engine, repo_id: str) -> WeightFacts | None:
    query = (
        select(Checkpoint.repo_id, Checkpoint.size, CheckpointRevision.parameter_count, CheckpointRevision.weight_bytes,
               CheckpointRevision.config_json)
        .join(CheckpointRevision, CheckpointRevision.checkpoint_id == Checkpoint.id)
        .where(CheckpointRevision.id == _checkpoint_head_id())
        .where(Checkpoint.repo_id == (resolve_checkpoint(engine, repo_id) or repo_id))
    )
    with engine.connect() as connection:
        row = connection.execute(query).first()
    if row is None:
        return None
    return WeightFacts(row.repo_id, row.parameter_count, row.weight_bytes, _config(row.config_json), row.size)


def drafter_weights(engine: Engine, repo_id: str) -> WeightFacts | None:
    query = (
        select(Drafter.repo_id, DrafterRevision.weight_bytes, DrafterRevision.config_json)
        .join(DrafterRevision, DrafterRevision.drafter_id == Drafter.id)
        .where(DrafterRevision.id == _drafter_head_id())
        .where(Drafter.repo_id == repo_id)
    )
    with engine.connect() as connection:
        row = connection.execute(query).first()
    if row is None:
        return None
    return WeightFacts(row.repo_id, None, row.weight_bytes, _config(row.config_json), None)


def _config(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None
