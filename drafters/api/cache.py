"""The API's body cache: built answers kept as bytes, capped in bytes, dropped by what a write changed.

Keys are the path and the query parameters the route read (validated, sorted: an unknown parameter is refused
before anything is cached, so junk in the query cannot make entries). Each entry has its body's `Scope`
(drafters/api/bodies.py). When the data version moves (registry/store/data_version.py: `DataVersion.parts`),
`invalidate` drops only what the change touched: new runs drop the bodies of their targets and drafters and the
listings of runs, and keep the other ten thousand targets' bodies; a change to the catalog, verdicts or events drops
everything (the watcher records an event for each checkpoint or drafter change); a job starting or ending
drops nothing (the plan is built per request).

A body that new runs made stale is not dropped at once: it stays, marked stale, while the app builds its
successor off the request path (`refresh` hands the keys out), for at most MAX_STALE_S; so a hot target that a
worker keeps measuring is never cold for the clients that poll it. A change that drops everything drops.

Each scope also keeps when this process saw it change, the answers' Last-Modified (not the runs' measurement
times, which a late-recorded run would put in the past).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drafters.api.bodies import Scope

ENTRY_OVERHEAD_BYTES = 600  # key, headers and bookkeeping of one entry, beside its body
MAX_STALE_S = 5.0  # a stale body is served while its successor is built, never longer than this
MAX_REFRESH = 256  # stale bodies rebuilt ahead per change; past that they are dropped
Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class _Entry:
    value: Any
    scope: Scope
    size: int
    rebuild: Callable[[], None] | None = None  # builds and puts its successor
    stale_since: float | None = None  # monotonic time new runs made it stale


class BodyCache:
    """Least recently used first out once `max_bytes` would be passed."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self.bytes = 0
        # Generation counters: an entry built before an invalidation of its scope is not stored after it.
        self._generation = 0  # everything
        self._target_gen: dict[str, int] = {}
        self._drafter_gen: dict[str, int] = {}
        self._runs_gen = 0
        self._cleared_at = datetime.now(UTC)
        self._target_changed: dict[str, datetime] = {}
        self._drafter_changed: dict[str, datetime] = {}
        self._runs_changed = self._cleared_at

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> Any | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found.stale_since is not None and time.monotonic() - found.stale_since > MAX_STALE_S:
                return None  # its successor is late: the request builds it
            self._entries.move_to_end(key)
            return found.value

    def generation(self) -> tuple[int, int, dict[str, int], dict[str, int]]:
        """Taken before a body is built, handed back to `put`."""
        with self._lock:
            return self._generation, self._runs_gen, dict(self._target_gen), dict(self._drafter_gen)

    def changed_at(self, scope: Scope) -> datetime:
        """When this process last saw something of `scope` change (at the latest its first data version read)."""
        with self._lock:
            times = [self._cleared_at]
            times += [self._target_changed[t] for t in scope.targets if t in self._target_changed]
            times += [self._drafter_changed[d] for d in scope.drafters if d in self._drafter_changed]
            if scope.runs:
                times.append(self._runs_changed)
            return max(times)

    def put(self, key: Key, value: Any, scope: Scope, size: int,
            generation: tuple[int, int, dict[str, int], dict[str, int]],
            rebuild: Callable[[], None] | None = None) -> None:
        everything, runs, targets, drafters = generation
        with self._lock:
            stale = (everything != self._generation or (scope.runs and runs != self._runs_gen)
                     or any(self._target_gen.get(t, 0) != targets.get(t, 0) for t in scope.targets)
                     or any(self._drafter_gen.get(d, 0) != drafters.get(d, 0) for d in scope.drafters))
            if stale or size + ENTRY_OVERHEAD_BYTES > self.max_bytes:
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            self._entries[key] = _Entry(value, scope, size + ENTRY_OVERHEAD_BYTES, rebuild)
            self.bytes += size + ENTRY_OVERHEAD_BYTES
            while self.bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.bytes -= dropped.size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
            self._generation += 1
            self._cleared_at = datetime.now(UTC)
            self._target_changed.clear()
            self._drafter_changed.clear()
            self._target_gen.clear()
            self._drafter_gen.clear()

    def invalidate_runs(self, pairs: set[tuple[str, str | None]] | None) -> list[Callable[[], None]]:
        """New runs of these (target, drafter) pairs; None: runs changed in a way not known pair by pair (every
        body that shows runs goes). The rebuilds of the bodies kept stale meanwhile, for the caller to run."""
        now = datetime.now(UTC)
        with self._lock:
            self._runs_gen += 1
            self._runs_changed = now
            if pairs is None:
                drop = [k for k, e in self._entries.items() if e.scope.runs or e.scope.targets or e.scope.drafters]
                self._cleared_at = now  # every scope that shows runs changed now
                self._generation += 1  # a body built meanwhile may hold the runs before the change
                for key in drop:
                    self.bytes -= self._entries.pop(key).size
                return []
            targets = {t for t, _ in pairs}
            drafters = {d for _, d in pairs if d is not None}
            for t in targets:
                self._target_gen[t] = self._target_gen.get(t, 0) + 1
                self._target_changed[t] = now
            for d in drafters:
                self._drafter_gen[d] = self._drafter_gen.get(d, 0) + 1
                self._drafter_changed[d] = now
            touched = [k for k, e in self._entries.items()
                       if e.scope.runs or e.scope.targets & targets or e.scope.drafters & drafters]
            rebuilds = []
            stale_at = time.monotonic()
            for key in touched:
                entry = self._entries[key]
                if entry.rebuild is not None and len(rebuilds) < MAX_REFRESH:
                    entry.stale_since = entry.stale_since or stale_at
                    rebuilds.append(entry.rebuild)
                else:
                    self.bytes -= self._entries.pop(key).size
            return rebuilds
