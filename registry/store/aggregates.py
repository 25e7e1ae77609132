"""Read-only SELECTs that aggregate in the database, for the dashboard (dashboard/queries.py makes the frames).

Every `*_rows` function returns plain values: `Rows` (column names and tuples), a dict for one row, or strings.
Nothing here writes; the engine comes from read_only.open_read_only. The tables of benchmark runs are in
run_aggregates.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Engine, Select, and_, case, func, literal, or_, select, union
from sqlalchemy.orm import aliased

from registry.domain.compat import VERDICT_ORDER
from registry.domain.hub_presence import GONE
from registry.domain.pair import NAME_CONVENTION
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
    WatchCursor,  # trusted publishers: the watched orgs
)
from registry.store.read_only import Rows, fetch_one, fetch_rows

REVISION_COLUMNS = ["sha", "seen_at", "last_modified", "weight_bytes", "weight_digest", "config_problem"]


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
            Compatibility.verdict, Compatibility.reasons, Compatibility.checks, Compatibility.checked_at,
            Compatibility.checkpoint_revision_id, Compatibility.drafter_revision_id,
            Drafter.publisher.label("publisher"), Checkpoint.org.label("org"),  # for _relied_on
        )
        .join(checkpoint_revision, checkpoint_revision.id == Compatibility.checkpoint_revision_id)
        .join(Checkpoint, Checkpoint.id == checkpoint_revision.checkpoint_id)
        .join(drafter_revision, drafter_revision.id == Compatibility.drafter_revision_id)
        .join(Drafter, Drafter.id == drafter_revision.drafter_id)
        .where(checkpoint_revision.id == _checkpoint_head_id(), drafter_revision.id == _drafter_head_id())
        .subquery("head_verdict")
    )


def _verdict_rank(column: Any) -> Any:
    return case(VERDICT_ORDER, value=column, else_=len(VERDICT_ORDER))


# ---- overview -----------------------------------------------------------------------------------


def _open_lag_targets() -> Select[Any]:
    """Checkpoints some drafter declares (directly or through an old name) with no drafter relied on yet."""
    declared = select(Checkpoint.id).where(or_(
        Checkpoint.repo_id.in_(select(DrafterTarget.target_repo_id)),
        Checkpoint.id.in_(select(CheckpointAlias.checkpoint_id).join(
            DrafterTarget, DrafterTarget.target_repo_id == CheckpointAlias.alias)),
    ))
    return declared.where(Checkpoint.id.not_in(select((v := _head_verdicts()).c.checkpoint_id).where(_relied_on(v))))


def _relied_on(verdicts: Any) -> Any:
    """domain/reliance.relied_on in SQL: exact, or declared (or structural, named after it) by a trusted org."""
    catalog_orgs = union(select(func.lower(Drafter.publisher)).where(Drafter.source == "catalog"),  # as Reads.
                         select(func.lower(Checkpoint.org)).where(Checkpoint.source == "catalog"),  # trusted_publishers
                         select(func.lower(WatchCursor.org)).where(WatchCursor.org.not_like("tag:%")))
    publisher, target = func.lower(verdicts.c.publisher), select(Checkpoint.repo_id).where(
        Checkpoint.id == verdicts.c.checkpoint_id).scalar_subquery()
    named = select(DrafterTarget.id).where(DrafterTarget.drafter_id == verdicts.c.drafter_id, DrafterTarget
                                           .declared_by == NAME_CONVENTION, DrafterTarget.target_repo_id == target)
    trusted = or_(publisher == func.lower(verdicts.c.org), publisher.in_(catalog_orgs))
    return or_(verdicts.c.verdict == "exact", and_(trusted, or_(verdicts.c.verdict == "declared", and_(
        verdicts.c.verdict == "structural", named.exists()))))


def _among(query: Select[Any], *filters: tuple[Any, Sequence[str]]) -> Select[Any]:
    """The query narrowed, for each filter with values, to the rows whose column is one of them."""
    for column, values in filters:
        if values:
            query = query.where(column.in_(list(values)))
    return query


def _gone_last(status: Any) -> Any:
    return case((status == GONE, 1), else_=0)


class CatalogRows:
    """The aggregates over checkpoints, drafters, verdicts and events, over one read-only engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def counts_row(self) -> dict[str, Any]:
        """Targets, drafters, exact pairs, open lags, runs, failed runs, events and DFlash v1 drafters, by name."""
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
            select(func.count()).select_from(Drafter).where(Drafter.in_21.is_(True)).scalar_subquery()
            .label("dflash_v1"),
        )
        with self._engine.connect() as connection:
            return dict(connection.execute(query).one()._mapping)

    # ---- events -------------------------------------------------------------------------------------

    def event_rows(self, *, types: Sequence[str] = (), orgs: Sequence[str] = (), families: Sequence[str] = (),
                   since: date | None = None, limit: int = 500) -> Rows:
        """Newest first, with each event's payload."""
        query = select(Event.id, Event.created_at, Event.type, Event.subject, Event.org, Event.family, Event.payload)
        query = _among(query, (Event.type, types), (Event.org, orgs), (Event.family, families))
        if since is not None:
            query = query.where(Event.created_at >= datetime(since.year, since.month, since.day, tzinfo=UTC))
        return fetch_rows(self._engine, query.order_by(Event.id.desc()).limit(limit))

    def _distinct(self, *columns: Any) -> list[tuple[str, ...]]:
        """The distinct non-null values of each column, sorted."""
        with self._engine.connect() as connection:
            return [
                tuple(connection.execute(select(column).where(column.is_not(None)).distinct().order_by(column))
                      .scalars())
                for column in columns
            ]

    def event_option_rows(self) -> list[tuple[str, ...]]:
        """The distinct event types, orgs and families."""
        return self._distinct(Event.type, Event.org, Event.family)

    # ---- availability -------------------------------------------------------------------------------

    def checkpoint_option_rows(self) -> list[tuple[str, ...]]:
        """The distinct checkpoint orgs, families and sizes."""
        return self._distinct(Checkpoint.org, Checkpoint.family, Checkpoint.size)

    def availability_rows(self, *, orgs: Sequence[str] = (), families: Sequence[str] = (), sizes: Sequence[str] = ()
    ) -> tuple[Rows, Rows]:
        """(the chosen checkpoints, the best head verdict of each (checkpoint, drafter method) and its drafter).

        Best = exact before structural before unknown before incompatible, then a drafter still on the Hub, then the
        earliest drafter. Both carry their status and its detail, so a repo gone from the Hub is shown as such."""
        checkpoints = select(
            Checkpoint.id.label("checkpoint_id"),
            Checkpoint.repo_id.label("checkpoint"),
            Checkpoint.org,
            Checkpoint.family,
            Checkpoint.size,
            Checkpoint.released.label("checkpoint_released"),
            Checkpoint.created_at_hub,
            Checkpoint.status.label("checkpoint_status"),
            Checkpoint.status_detail.label("checkpoint_status_detail"),
        )
        checkpoints = _among(checkpoints, (Checkpoint.org, orgs), (Checkpoint.family, families),
                             (Checkpoint.size, sizes))
        targets = fetch_rows(self._engine, checkpoints.order_by(Checkpoint.repo_id))

        verdicts = _head_verdicts()
        ranked = (
            select(
                verdicts.c.checkpoint_id,
                Drafter.method,
                verdicts.c.verdict,
                Drafter.repo_id.label("drafter"),
                Drafter.released.label("drafter_released_on"),
                Drafter.first_seen.label("drafter_first_seen"),
                Drafter.source.label("drafter_source"),
                Drafter.status.label("drafter_status"),
                Drafter.status_detail.label("drafter_status_detail"), Drafter.license.label("drafter_license"),
                func.row_number()
                .over(
                    partition_by=(verdicts.c.checkpoint_id, Drafter.method),
                    order_by=(
                        _verdict_rank(verdicts.c.verdict),
                        _gone_last(Drafter.status),
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
        return targets, fetch_rows(self._engine, best_query)

    def resolve_checkpoint(self, repo_id: str) -> str | None:
        """The stored repo id for a repo id or an old name of it."""
        query = select(Checkpoint.repo_id).where(
            or_(
                Checkpoint.repo_id == repo_id,
                Checkpoint.id.in_(select(CheckpointAlias.checkpoint_id).where(CheckpointAlias.alias == repo_id)),
            )
        )
        with self._engine.connect() as connection:
            return connection.execute(query).scalar()

    def search_checkpoints(self, text: str, limit: int = 20) -> list[str]:
        """Repo ids containing `text`, any case; % and _ in it match themselves."""
        escaped = text.strip().lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            select(Checkpoint.repo_id)
            .where(func.lower(Checkpoint.repo_id).like(f"%{escaped}%", escape="\\"))
            .order_by(Checkpoint.repo_id)
            .limit(limit)
        )
        with self._engine.connect() as connection:
            return list(connection.execute(query).scalars())

    def drafters_for_rows(self, repo_id: str) -> Rows:
        """Every head verdict of a checkpoint (or an old name of it), best first, with the release dates."""
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
                Drafter.source,
                Drafter.status,
                Drafter.status_detail,
                Checkpoint.released.label("checkpoint_released"),
                Checkpoint.created_at_hub,
            )
            .join(Drafter, Drafter.id == verdicts.c.drafter_id)
            .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
            .where(Checkpoint.repo_id == (self.resolve_checkpoint(repo_id) or repo_id))
            .order_by(_verdict_rank(verdicts.c.verdict), _gone_last(Drafter.status), Drafter.method, Drafter.repo_id)
        )
        return fetch_rows(self._engine, query)

    # ---- lag ----------------------------------------------------------------------------------------

    def dflash_v1_rows(self) -> Rows:
        """z-lab's DFlash v1 drafters (the 21), each with its target, family, release date and block size."""
        query = (
            select(Drafter.repo_id.label("drafter"), DrafterTarget.target_repo_id.label("target"), Drafter.family,
                   Drafter.released, Drafter.block_size)
            .join(DrafterTarget, DrafterTarget.drafter_id == Drafter.id, isouter=True)
            .where(Drafter.in_21.is_(True))
            .order_by(Drafter.family, Drafter.repo_id)
        )
        return fetch_rows(self._engine, query)

    # ---- one pair -----------------------------------------------------------------------------------

    def pair_choice_rows(self) -> tuple[Rows, Rows]:
        """((target, drafter, verdict) of every head verdict, (target, drafter, None) of every measured pair)."""
        verdicts = _head_verdicts()
        judged = (
            select(Checkpoint.repo_id.label("target"), Drafter.repo_id.label("drafter"), verdicts.c.verdict)
            .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
            .join(Drafter, Drafter.id == verdicts.c.drafter_id)
        )
        measured = select(BenchmarkRun.target, BenchmarkRun.drafter, literal(None).label("verdict")).where(
            BenchmarkRun.drafter.is_not(None)
        ).distinct()
        return fetch_rows(self._engine, judged), fetch_rows(self._engine, measured)

    def pair_verdict_row(self, target: str, drafter: str) -> dict[str, Any] | None:
        """The head verdict of one pair: verdict, reasons, checks, checked_at, checkpoint_sha, drafter_sha."""
        verdicts = _head_verdicts()
        query = (
            select(verdicts.c.verdict, verdicts.c.reasons, verdicts.c.checks, verdicts.c.checked_at,
                   CheckpointRevision.sha.label("checkpoint_sha"), DrafterRevision.sha.label("drafter_sha"))
            .join(Checkpoint, Checkpoint.id == verdicts.c.checkpoint_id)
            .join(Drafter, Drafter.id == verdicts.c.drafter_id)
            .join(CheckpointRevision, CheckpointRevision.id == verdicts.c.checkpoint_revision_id)
            .join(DrafterRevision, DrafterRevision.id == verdicts.c.drafter_revision_id)
            .where(Checkpoint.repo_id == (self.resolve_checkpoint(target) or target), Drafter.repo_id == drafter)
        )
        return fetch_one(self._engine, query)

    def hub_status_rows(self, target: str, drafter: str) -> list[dict[str, Any]]:
        """{role, repo_id, status, status_detail} of the pair's target and drafter, those the registry records."""
        checkpoint = fetch_one(self._engine, select(
            literal("target").label("role"), Checkpoint.repo_id, Checkpoint.status, Checkpoint.status_detail)
            .where(Checkpoint.repo_id == (self.resolve_checkpoint(target) or target)))
        drafter_ = fetch_one(self._engine, select(
            literal("drafter").label("role"), Drafter.repo_id, Drafter.status, Drafter.status_detail)
            .where(Drafter.repo_id == drafter))
        return [row for row in (checkpoint, drafter_) if row is not None]

    def checkpoint_revision_rows(self, repo_id: str) -> Rows:
        query = (
            select(*(getattr(CheckpointRevision, name) for name in REVISION_COLUMNS),
                   CheckpointRevision.parameter_count, (CheckpointRevision.sha == Checkpoint.head_sha).label("head"))
            .join(Checkpoint, Checkpoint.id == CheckpointRevision.checkpoint_id)
            .where(Checkpoint.repo_id == (self.resolve_checkpoint(repo_id) or repo_id))
            .order_by(CheckpointRevision.id)
        )
        return fetch_rows(self._engine, query)

    def drafter_revision_rows(self, repo_id: str) -> Rows:
        query = (
            select(*(getattr(DrafterRevision, name) for name in REVISION_COLUMNS), DrafterRevision.block_size,
                   (DrafterRevision.sha == Drafter.head_sha).label("head"))
            .join(Drafter, Drafter.id == DrafterRevision.drafter_id)
            .where(Drafter.repo_id == repo_id)
            .order_by(DrafterRevision.id)
        )
        return fetch_rows(self._engine, query)
