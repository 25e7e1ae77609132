"""The registry's one database: the only package that sees the ORM and sessions.

`Store` is assembled here from one mixin per concern (core.py holds the engine and sessions): checkpoints.py and
drafters.py (commands), verdicts.py (compatibility), reads.py, events.py (the event log), watch_units.py (the
watcher's units of work over those, their values in unit_records.py), watch_state.py (cursors, leases, failures,
service heartbeats) and subscriptions.py (webhooks). Runs and jobs are functions over a Store
(runs.py, jobs.py); records.py holds the plain values that go in and out.
"""

from registry.store.core import NotFound, aware, utcnow
from registry.store.subscriptions import Subscriptions
from registry.store.watch_units import WatchUnits
from registry.store.watch_state import WatchState


class Store(WatchUnits, WatchState, Subscriptions):
    """Commands that write and the reads they need, over plain records (registry.domain.records)."""


__all__ = ["NotFound", "Store", "aware", "utcnow"]
