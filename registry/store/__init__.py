"""The registry's one database: the only package that sees the ORM and sessions.

`Store` holds the engine, sessions and units of work (core.py) and one object per area, each listed on it below;
an area that needs another gets it in its constructor, none inherits from another. The plain values that go in
and out are in registry/domain/records.py and registry/domain/watch_records.py.
"""

from sqlalchemy import Engine

from registry.store.catalog_import import CatalogImport
from registry.store.checkpoints import Checkpoints
from registry.store.core import NotFound, StoreCore, aware, utcnow
from registry.store.curves import Curves
from registry.store.downloads import Downloads
from registry.store.drafters import Drafters
from registry.store.events import Events
from registry.store.jobs import Jobs
from registry.store.lifecycle import RepoLifecycle
from registry.store.plan_facts import PlanFacts
from registry.store.read_memo import ReadMemo
from registry.store.reads import Reads
from registry.store.runs import Runs
from registry.store.subscriptions import Subscriptions
from registry.store.verdicts import Verdicts
from registry.store.watch_state import WatchState
from registry.store.watch_writes import WatchWrites
from registry.store.workers import Workers


class Store(StoreCore):
    """The database's engine, sessions and units of work (`session`, `unit`, `defer`: StoreCore), and its areas:

    - `lifecycle`: the repo lifecycle both kinds share (find, status, move, head, history), by `RepoKind`
    - `checkpoints`: create, rename and re-status checkpoints, record their revisions
    - `drafters`: the same for drafters, and dropping a catalog drafter
    - `verdicts`: recompute compatibility verdicts
    - `reads`: checkpoints, drafters, revisions, verdicts and aliases as records
    - `events`: the event log
    - `watch`: the watcher's units of work (one transaction per model read)
    - `watch_state`: cursors, leases, failures and quarantine, service status rows
    - `subscriptions`: webhook subscriptions and their deliveries
    - `curves`: speedup curves, one per `drafters sweep`
    - `runs`: benchmark runs (recorded once per run id, read back with renames followed, their regression events,
      predictions, the pricing model's sample)
    - `jobs`: the job queue (enqueue, claim what fits a worker under a lease, heartbeat, finish, fail, read back)
    - `workers`: workers' stated capabilities, refreshed by their heartbeat, and the live ones
    - `downloads`: the download ledger (each revision the service fetched: progress, completion, last use, eviction)
    - `catalog`: the bundled catalog loaded, idempotently (a drafter built into a checkpoint marks that checkpoint)
    - `plan_facts`: what the planner reads (pairs at both heads, what is measured, autoverify's jobs, downloads)
    """

    def __init__(self, engine: Engine, memo: ReadMemo | None = None) -> None:
        """`memo`: what `reads` (which every area that reads shares) remembers for one data version (the API's
        snapshot: registry/store/read_memo.py); None reads the database each time."""
        super().__init__(engine)
        self.lifecycle = RepoLifecycle(self)
        self.checkpoints = Checkpoints(self, self.lifecycle)
        self.drafters = Drafters(self, self.lifecycle)
        self.verdicts = Verdicts(self)
        self.reads = Reads(self, self.lifecycle, memo)
        self.events = Events(self)
        self.watch = WatchWrites(self, lifecycle=self.lifecycle, checkpoints=self.checkpoints, drafters=self.drafters,
                                reads=self.reads, verdicts=self.verdicts, events=self.events)
        self.watch_state = WatchState(self)
        self.subscriptions = Subscriptions(self)
        self.curves = Curves(self)
        self.runs = Runs(self, self.checkpoints, self.reads)
        self.jobs = Jobs(self)
        self.workers = Workers(self)
        self.downloads = Downloads(self)
        self.plan_facts = PlanFacts(self, self.reads, self.workers)
        self.catalog = CatalogImport(self, self.checkpoints, self.drafters, self.reads, self.verdicts)


__all__ = ["NotFound", "Store", "aware", "utcnow"]
