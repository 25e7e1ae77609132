"""What many answers share, read once for one data version: the API's snapshot (ReadOnlyQueries.snapshot) hands a
ReadMemo to its Reads, which then reads each drafter, each drafter's head revision and the trusted publishers once.

Every API answer about a target reads its drafters, their head revisions and the trusted publishers, and a few
hundred drafters serve ten thousand targets, so reading them per answer was most of a cold answer's work
(bench/api.py: 12 of 20 queries per `/v1/targets/{id}/drafters` body were drafters; the trusted publishers, two
scans of the catalog, were 18 ms of its 75). A drafter, revision or catalog change moves the events or catalog part
of the data version (the watcher records an event for each; DataVersion.parts), and the API then builds bodies
from a new snapshot, so nothing remembered here outlives what it was read from.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

_Read = TypeVar("_Read")


class ReadMemo:
    """Reads remembered by (what, key) for this object's lifetime; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[tuple[str, Hashable], Any] = {}

    def remembered(self, what: str, key: Hashable, read: Callable[[], _Read]) -> _Read:
        with self._lock:
            if (what, key) in self._found:
                found: _Read = self._found[(what, key)]
                return found
        found = read()  # outside the lock: two threads may both read it once, never wait on each other
        with self._lock:
            self._found[(what, key)] = found
        return found
