"""Seeded data for benchmarks and tests: rows written straight into the tables in bulk, the one place outside the
store's areas that writes them.

A benchmark of 100,000 runs cannot wait for the store to write them one unit of work at a time, and the tables
are the store's own: callers name a table by its schema name ("checkpoint", "event") and hand plain column
values, so no benchmark sees the ORM or a session. These are functions over a `Store`, not an area on it: seeding
is no operation of the registry, and `drafters` never calls it.

Runs go in through the store's own encoders (`mappers.run_values`, `set_values`), so a seeded run reads back as
the `Run` it was made from; a copy of a stored row (`copy_run`, `copy_checkpoints`) is its columns with new values
over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any, Literal

from sqlalchemy import Table, and_, func, insert, select

from registry.domain.run import Run
from registry.store import Store
from registry.store.mappers import run_values, set_values
from registry.store.models import Base

BATCH = 5_000
RepoTable = Literal["checkpoint", "drafter"]


def table(name: str) -> Table:
    return Base.metadata.tables[name]


def insert_rows(store: Store, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """`rows` (column values) into the table `name`, BATCH at a time, in one transaction."""
    into = table(name)
    rows = iter(rows)
    with store.engine.begin() as connection:
        while batch := [dict(row) for row in islice(rows, BATCH)]:
            connection.execute(insert(into), batch)


def repo_ids(store: Store, name: RepoTable) -> list[tuple[int, str]]:
    """(primary key, repo id) of every checkpoint or drafter, in primary-key order."""
    repos = table(name)
    with store.engine.connect() as connection:
        return [(pk, repo_id) for pk, repo_id in
                connection.execute(select(repos.c.id, repos.c.repo_id).order_by(repos.c.id))]


def revision_ids(store: Store, name: RepoTable) -> dict[int, int]:
    """Repo primary key -> the primary key of its newest revision row."""
    revisions = table(f"{name}_revision")
    owner = revisions.c[f"{name}_id"]
    with store.engine.connect() as connection:
        return {repo: revision for repo, revision in
                connection.execute(select(owner, revisions.c.id).order_by(revisions.c.id))}


def insert_runs(store: Store, runs: Sequence[Run]) -> None:
    """Runs with their per-set rows, in bulk; each needs its `run_id` and `created_at` (no defaults are filled)."""
    insert_rows(store, "benchmark_run", (run_values(run) for run in runs))
    benchmark_run = table("benchmark_run")
    with store.engine.connect() as connection:
        keys = {run_id: pk for run_id, pk in connection.execute(select(benchmark_run.c.run_id, benchmark_run.c.id))}
    insert_rows(store, "run_set_result", ({**set_values(result), "run_pk": keys[run.run_id]}
                                          for run in runs for result in run.per_set))


def copy_run(store: Store, run_id: str, copies: Iterable[Mapping[str, Any]]) -> None:
    """The stored run `run_id` (its benchmark_run row: no per-set rows, no prediction) copied once per item of
    `copies`, each copy the row's columns with the item's values over them; each item names its own `run_id`."""
    benchmark_run = table("benchmark_run")
    with store.engine.connect() as connection:
        row = connection.execute(select(benchmark_run).where(benchmark_run.c.run_id == run_id)).mappings().one()
    base = {column: value for column, value in row.items() if column != "id"}
    insert_rows(store, "benchmark_run", ({**base, **values} for values in copies))


def copy_checkpoints(store: Store, total: int, prefix: str = "bench") -> dict[str, str]:
    """Copies of the stored checkpoints that have a head revision with verdicts (each with that revision and its
    verdicts) until there are `total` checkpoints; copy n is `<prefix>-<n>/<the source's name>` in the org
    `<prefix>-<n>`, found on the Hub (not in the catalog). Returns copy repo id -> source repo id, in the order made."""
    checkpoint, revision, compatibility = table("checkpoint"), table("checkpoint_revision"), table("compatibility")
    with store.engine.connect() as connection:
        stored = connection.execute(select(func.count()).select_from(checkpoint)).scalar_one()
        heads = connection.execute(select(checkpoint, revision.c.id.label("head_revision_id")).join(revision, and_(
            revision.c.checkpoint_id == checkpoint.c.id, revision.c.sha == checkpoint.c.head_sha))
            .order_by(checkpoint.c.id)).mappings().all()
        head_rows = {r.id: r for r in connection.execute(select(revision).where(
            revision.c.id.in_([h["head_revision_id"] for h in heads]))).mappings()}
        verdicts: dict[int, list[dict[str, Any]]] = {}
        for verdict in connection.execute(select(compatibility).where(
                compatibility.c.checkpoint_revision_id.in_(list(head_rows)))).mappings():
            verdicts.setdefault(verdict["checkpoint_revision_id"], []).append(dict(verdict))
    sources = [h for h in heads if verdicts.get(h["head_revision_id"])]
    made: dict[str, Mapping[str, Any]] = {}
    for n in range(1, total - stored + 1):
        source = sources[(n - 1) % len(sources)]
        org = f"{prefix}-{n:05d}"
        made[f"{org}/{source['repo_id'].split('/', 1)[1]}"] = source
    # A copy is a repo the watcher found (source "hub"), not a catalog entry: the catalog's publishers stay its own.
    insert_rows(store, "checkpoint", ({**_columns(checkpoint, source), "repo_id": repo_id, "org": repo_id.split("/")[0],
                                       "source": "hub"} for repo_id, source in made.items()))
    new_ids = {repo_id: pk for pk, repo_id in repo_ids(store, "checkpoint") if repo_id in made}
    insert_rows(store, "checkpoint_revision", (
        {**_columns(revision, head_rows[source["head_revision_id"]]), "checkpoint_id": new_ids[repo_id]}
        for repo_id, source in made.items()))
    new_revisions = revision_ids(store, "checkpoint")
    insert_rows(store, "compatibility", (
        {**_columns(compatibility, verdict), "checkpoint_revision_id": new_revisions[new_ids[repo_id]]}
        for repo_id, source in made.items() for verdict in verdicts[source["head_revision_id"]]))
    return {repo_id: source["repo_id"] for repo_id, source in made.items()}


def _columns(of: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values for the table's own columns, its primary key left out (a copy gets its own)."""
    return {column.name: row[column.name] for column in of.columns if column.name != "id"}


def run_pairs(store: Store, targets: Sequence[str]) -> list[tuple[str, str | None]]:
    """The distinct (target, drafter) pairs of the stored runs into `targets`, in a stable order."""
    benchmark_run = table("benchmark_run")
    with store.engine.connect() as connection:
        pairs = select(benchmark_run.c.target, benchmark_run.c.drafter).distinct().where(
            benchmark_run.c.target.in_(list(targets)))
        return [(target, drafter) for target, drafter in connection.execute(pairs.order_by(*pairs.selected_columns))]
