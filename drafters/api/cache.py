"""The API's body cache: built answers kept as bytes, capped in bytes, dropped by what a write changed.

Keys are the path and the query parameters the route read (validated, sorted: an unknown parameter is refused
before anything is cached, so junk in the query cannot make entries). Each entry has its body's `Scope`
(drafters/api/bodies.py). When the data version moves (registry/store/read_only.py `data_parts`), `invalidate`
drops only what the change touched: new runs drop the bodies of their targets and drafters and the listings of
runs, and keep the other ten thousand targets' bodies; a change to the catalog, verdicts or events drops
everything (the watcher records an event for each checkpoint or drafter change); a job starting or ending
drops nothing (the plan is built per request).

Each scope also keeps when this process saw it change, the answers' Last-Modified (not the runs' measurement
times, which a late-recorded run would put in the past).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drafters.api.bodies import Scope

ENTRY_OVERHEAD_BYTES = 600  # key, headers and bookkeeping of one entry, beside its body
Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class _Entry:
    value: Any
    scope: Scope
    size: int


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
            generation: tuple[int, int, dict[str, int], dict[str, int]]) -> None:
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
            self._entries[key] = _Entry(value, scope, size + ENTRY_OVERHEAD_BYTES)
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

    def invalidate_runs(self, pairs: set[tuple[str, str | None]] | None) -> int:
        """New runs of these (target, drafter) pairs; None: runs changed in a way not known pair by pair (every
        body that shows runs goes). How many entries were dropped."""
        now = datetime.now(UTC)
        with self._lock:
            self._runs_gen += 1
            self._runs_changed = now
            if pairs is None:
                drop = [k for k, e in self._entries.items() if e.scope.runs or e.scope.targets or e.scope.drafters]
                self._cleared_at = now  # every scope that shows runs changed now
            else:
                targets = {t for t, _ in pairs}
                drafters = {d for _, d in pairs if d is not None}
                for t in targets:
                    self._target_gen[t] = self._target_gen.get(t, 0) + 1
                    self._target_changed[t] = now
                for d in drafters:
                    self._drafter_gen[d] = self._drafter_gen.get(d, 0) + 1
                    self._drafter_changed[d] = now
                drop = [k for k, e in self._entries.items()
                        if e.scope.runs or e.scope.targets & targets or e.scope.drafters & drafters]
            for key in drop:
                self.bytes -= self._entries.pop(key).size
            if pairs is None:
                self._generation += 1  # a body built meanwhile may hold the runs before the change
            return len(drop)
