"""Which events the API's `/v1/events` may hand out: never one behind a cursor a writer could still commit below.

Event ids come from a sequence. On SQLite one writer holds the database from its first write to its commit, so ids
commit in order: every visible event may go out. On PostgreSQL two transactions can take ids 7 and 8, and 8
commit first; a poller given 8 then asks `after=8` and never sees 7. The rule here: an id goes out only once
every transaction that could still hold a smaller id has ended.

A watermark is (the newest visible event id, the snapshot's xmax) from one statement: every transaction that had
taken an event id up to that max had started, so its transaction id is below xmax. Once a later snapshot's xmin
is at or above that xmax (all of them committed or aborted) and SETTLE_S has passed, every id up to the max is
final: visible, or never to be. The SETTLE_S wait covers the instant between an INSERT taking its id from the
sequence and the transaction getting its id (the same statement): a writer stalled longer than that between the
two is the one case the rule does not cover. Events past the newest settled watermark wait for the next poll
(normally a second or two).
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import Engine

from registry.store.read_only import EventWatermark, event_watermark, oldest_running_transaction

SETTLE_S = 1.0
MAX_WATERMARKS = 64


class EventHorizon:
    """The newest event id that is safe to hand out, per process (each API worker keeps its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[float, EventWatermark]] = []
        self._settled = 0

    def settled_up_to(self, engine: Engine) -> int:
        mark = event_watermark(engine)
        if mark.snapshot_xmax is None:  # SQLite: ids commit in order
            return mark.max_id
        now = time.monotonic()
        oldest = oldest_running_transaction(engine)
        with self._lock:
            self._pending.append((now, mark))
            del self._pending[:-MAX_WATERMARKS]  # a stuck transaction must not grow this list
            keep = []
            for taken, pending in self._pending:
                assert pending.snapshot_xmax is not None
                if oldest is not None and oldest >= pending.snapshot_xmax and now - taken >= SETTLE_S:
                    self._settled = max(self._settled, pending.max_id)
                else:
                    keep.append((taken, pending))
            self._pending = keep
            return self._settled
