"""The one read object of a database, for the dashboard and the API: `ReadOnlyQueries(url)` owns a read-only engine
(read_only.py) and every read over it, so that no caller outside the store holds an Engine or a Session:

- `catalog`: the aggregates over checkpoints, drafters, verdicts and events (aggregates.py)
- `benchmarks`: the aggregates over benchmark runs (run_aggregates.py)
- `service`: what each part of the service last said, and the job queue (service_aggregates.py)
- `version`: the data version in parts, the runs added since one, the settled event id (data_version.py)
- `store`: a `Store` over the same connections, for the registry's own reads that take one (reports, calibration,
  the plan's facts); a write through it fails at the connection
- `snapshot()`: a `Store` whose drafter reads are remembered for its lifetime (one data version: the API's bodies)

The aggregates answer in plain rows and records; the callers cache what they build from them (the dashboard's
tables per URL, dashboard/page_cache.py; the API's bodies per data version, drafters/api/reader.py).
"""

from __future__ import annotations

from registry.store import Store
from registry.store.aggregates import CatalogRows
from registry.store.data_version import DataVersion
from registry.store.read_memo import ReadMemo
from registry.store.read_only import open_read_only, schema_problem
from registry.store.run_aggregates import RunRows
from registry.store.service_aggregates import ServiceRows


class ReadOnlyQueries:
    """Every read the dashboard and the API make, over one read-only engine per database URL. Opening raises
    DatabaseMissing (a DatabaseError) when the URL names a SQLite file that does not exist."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine = open_read_only(url)
        self.store = Store(self._engine)
        self.catalog = CatalogRows(self._engine)
        self.benchmarks = RunRows(self._engine)
        self.service = ServiceRows(self._engine)
        self.version = DataVersion(self._engine)

    def close(self) -> None:
        self._engine.dispose()

    def schema_problem(self) -> str | None:
        """Why this database cannot be read, or None when its schema is current."""
        return schema_problem(self._engine)

    def snapshot(self) -> Store:
        """A Store over the same connections whose drafters, their head revisions and the trusted publishers are
        read once for its lifetime: build it anew when the data version's catalog, events or verdicts move."""
        return Store(self._engine, memo=ReadMemo())
